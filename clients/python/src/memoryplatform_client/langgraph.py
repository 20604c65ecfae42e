"""LangGraph adapter (extra ``langgraph``): :class:`MemoryPlatformStore`, a ``BaseStore`` over users'
memories, with sync ``batch`` and async ``abatch``, TTLs and server-side search.

A namespace names a user, labels, and a visibility; an item's key and value are the memory's. LangGraph's
docs' layouts that say where the user is, next to ``"memories"``, are read as they are; any other needs
``user_index``:

| namespace | user | labels |
|---|---|---|
| ``(user_id, "memories", ...)`` (LangGraph's docs) | ``user_id`` | ``("memories", ...)`` |
| ``("memories", user_id, ...)`` (LangGraph's docs; LangMem's) | ``user_id`` | ``("memories", ...)`` |
| ``("profiles", user_id)``, with ``user_index=1`` | ``user_id`` | ``("profiles",)`` |
| ``("users", user_id, "memories")``, with ``user_index=1`` | ``user_id`` | ``("users", "memories")`` |
| ``(user_id, "chitchat", "prefs")``, with ``user_index=0`` | ``user_id`` | ``("chitchat", "prefs")`` |

``MemoryPlatformStore(..., user_index=n)`` takes the user from position ``n`` of every namespace, every other
element a label (as the TypeScript store's ``userIndex``). Without it a namespace names its user next to
``"memories"``, and any other (``("profiles", user_id)``: is the user ``profiles`` or ``user_id``?) is refused
with a ``ValueError`` that names ``user_index``, never guessed (:func:`user_position`; the TypeScript store
has the same rule).

A namespace ending in ``"global"`` is the user's ``global`` entries (every agent reads them); ending in
``("group", group_id)``, ``group`` entries shared with that group; else the agent's own ``self`` entries.

On the platform: ``userId`` is the user; the labels are the key's prefix, each followed by ``/``; the
item's key ends it (``(u, "memories")``, ``"food"`` is key ``memories/food`` of user ``u``); the category is
the store's (``fact``). Labels and keys are written with ``%`` as ``%25`` and ``/`` as ``%2F``, so the key
splits back into labels and key: the mapping is reversible (the TypeScript store maps the same way, so both
read what the other wrote). Every element but the user is a label, ``"memories"`` too:
``("memories", u, "prefs")`` and ``(u, "memories", "prefs")`` name the same entries (keys
``memories/prefs/...``), and an answer uses the spelling asked, so each layout round-trips (a ``put``, then
``search`` and ``get`` give back its namespace). A namespace maps to one user and one key, or is refused: the
user's position may not hold a word the layout reserves (``memories``, ``global``, ``group``), which would
make ``("memories", "u-77")`` with ``user_index=0`` the user ``memories`` (:data:`RESERVED`).

Values round-trip as put: a dict stays a dict, a string a string. Each ``put`` is a turn of its own (a
store has no turns): a loop of puts meets no ``maxWritesPerTurn``, which bounds an LLM's writes in one turn.

``put(..., ttl=minutes)`` sets the entry's ``validTo`` (the platform's ``ttlSeconds``); after it no read finds
the item, and Dream deletes it after the agent's ``pruneExpiredAfterDays``. A ``get`` or ``search`` with
``refresh_ttl`` (LangGraph's default) renews the TTL of what it returns. ``search`` sends its ``query``
(``hybrid``: meaning and words, each item with a ``score``), ``filter`` (``{field: value}`` or ``$eq``,
``$ne``, ``$gt``, ``$gte``, ``$lt``, ``$lte``), the prefix's labels and visibility, ``limit`` and ``offset``
to the server, which applies them before cutting the page. ``search`` and ``list_namespaces`` need a prefix
that names the user. ``list_namespaces``' prefix and suffix may hold ``"*"`` (LangGraph's ``MatchCondition``:
any one element) anywhere but at the user: the server matches them (the user list's ``keyPattern``,
:func:`key_patterns`), and the store checks each namespace of the newest 1,000 entries it answers with.

The agent is the key's: use an agent key. ``search`` without a ``query`` lists the user's entries, newest
first.

Opt-in memory formation: add :func:`extraction_node` to a graph after the agent's node, and after each turn
the turn's messages (from the last user message on) go to the server's extraction, whose facts about the
user become items of the graph's namespace (``("{user_id}", "memories")`` by default, filled from
``config["configurable"]``), so ``store.search`` and ``store.get`` there find them.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import uuid
from collections.abc import Callable, Generator, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar, Unpack

from langgraph.config import get_config, get_store
from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
)

from memoryplatform_client import _calls as calls
from memoryplatform_client._async import AsyncMemoryPlatform
from memoryplatform_client._core import Call
from memoryplatform_client._keypatterns import SEP, WILDCARD, escape_label, key_patterns, unescape_label
from memoryplatform_client._sync import MemoryPlatform
from memoryplatform_client.errors import APIError, MemoryPlatformError, NotFoundError
from memoryplatform_client.types import ExtractMessage, MemoryEntry, Visibility

logger = logging.getLogger(__name__)

ROOT = "memories"
RESERVED = (ROOT, "global", "group")  # never a user: the layouts' root and scopes
SCAN_LIMIT = 1000  # the server's largest page

T = TypeVar("T")
# A store operation as a generator: it yields the calls it needs and gets their answers (or their errors)
# back, so that one definition serves the sync and the async store.
Plan = Generator[Call[Any], Any, T]


def _key_prefix(labels: Sequence[str]) -> str:
    return "".join(escape_label(label) + SEP for label in labels)


@dataclass(frozen=True)
class Place:
    """Where a namespace (or a prefix of one) puts items: the user, the labels, the visibility and group
    (``None``: any, in a prefix), and the spelling: ``user_at``, the user's position among the labels."""

    user_id: str
    labels: tuple[str, ...]
    visibility: Visibility | None
    group_id: str | None
    user_at: int = 0

    @classmethod
    def of(cls, namespace: tuple[str, ...], *, prefix: bool = False, user_index: int | None = None) -> Place:
        """The place of ``namespace``; ``user_index``: the user's position, every other element a label
        (``None``: :func:`user_position`)."""
        if any(not isinstance(part, str) or not part for part in namespace):
            raise ValueError(f"A namespace is a tuple of non-empty strings: got {namespace!r}.")
        index = user_position(namespace) if user_index is None else user_index
        if len(namespace) <= index or namespace[index] == WILDCARD:
            raise ValueError(
                f"This store's namespaces name the user at position {index} (user_index): got {namespace!r}."
            )
        if namespace[index] in RESERVED:
            raise ValueError(
                f"{namespace!r} names the user {namespace[index]!r} at position {index}, a word the layout "
                f"reserves ({', '.join(RESERVED)}): put the user where the layout says (user_index)."
            )
        rest = namespace[:index] + namespace[index + 1 :]
        visibility: Visibility | None = None if prefix else "self"
        group: str | None = None
        if rest[-1:] == ("global",):
            visibility, rest = "global", rest[:-1]
        elif len(rest) >= 2 and rest[-2] == "group":
            visibility, group, rest = "group", rest[-1], rest[:-2]
        elif prefix and rest[-1:] == ("group",):
            visibility, rest = "group", rest[:-1]
        return cls(namespace[index], rest, visibility, group, index)

    @property
    def key_prefix(self) -> str:
        return _key_prefix(self.labels)

    def key(self, key: str) -> str:
        """The platform's key of an item of this place."""
        return self.key_prefix + escape_label(key)

    @property
    def group_ids(self) -> list[str] | None:
        return [self.group_id] if self.group_id else None

    def holds(self, entry: MemoryEntry) -> bool:
        if self.visibility is not None and entry["visibility"] != self.visibility:
            return False
        return self.group_id is None or self.group_id in entry["groupIds"]

    def narrowing(self) -> calls.ListOptions:
        """What the server narrows a list or search to for this place (as a prefix)."""
        options: calls.ListOptions = {}
        if self.labels:
            options["key_prefix"] = self.key_prefix
        if self.visibility is not None:
            options["visibility"] = self.visibility
        if self.group_ids:
            options["group_ids"] = self.group_ids
        return options

    def namespaces_of(self, entry: MemoryEntry) -> tuple[list[tuple[str, ...]], str]:
        """The namespaces an entry is found under in this place's spelling (a group entry under each of its
        groups), and the item's key."""
        *labels, key = (unescape_label(part) for part in entry["key"].split(SEP))
        at = min(self.user_at, len(labels))
        base = (*labels[:at], entry["userId"], *labels[at:])
        if entry["visibility"] == "global":
            return [(*base, "global")], key
        if entry["visibility"] == "group":
            return [(*base, "group", group) for group in entry["groupIds"]], key
        return [base], key


def user_position(namespace: Sequence[str]) -> int:
    """Where the user is in a namespace of a store without ``user_index``: next to ``"memories"``, as
    LangGraph's docs spell it, ``("memories", user_id, ...)`` (position 1) or ``(user_id, "memories", ...)``
    (position 0). Any other layout names its user nowhere the store can tell (is ``("profiles", "u1")`` user
    ``profiles`` or user ``u1``?): refused, never guessed, with the option that says it (the same rule as
    the TypeScript store's ``userIndex``)."""
    if len(namespace) >= 2 and namespace[0] == ROOT:
        return 1
    if len(namespace) >= 2 and namespace[1] == ROOT and namespace[0] != WILDCARD:
        return 0
    raise ValueError(
        f"Which element of {tuple(namespace)!r} is the user? Without user_index a namespace names its user "
        f"next to {ROOT!r}: ({ROOT!r}, user_id, ...) or (user_id, {ROOT!r}, ...). For another layout, give "
        "MemoryPlatformStore(..., user_index=N), the user's position: 1 for ('profiles', user_id) or "
        "('users', user_id, 'memories'), 0 for (user_id, 'prefs')."
    )


def _time(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def _matches(namespace: tuple[str, ...], condition: MatchCondition) -> bool:
    path = tuple(condition.path)
    if len(path) > len(namespace):
        return False
    part = (
        namespace[: len(path)]
        if condition.match_type == "prefix"
        else namespace[len(namespace) - len(path) :]
    )
    return all(want in (WILDCARD, got) for want, got in zip(path, part, strict=True))


def _refresh(place: Place, entries: list[MemoryEntry], refresh_ttl: bool) -> Plan[None]:
    """Renew the TTL of the entries read (one call), when asked and any has an end."""
    ids = [entry["id"] for entry in entries if entry.get("validTo")]
    if refresh_ttl and ids:
        yield calls.refresh_ttl(place.user_id, ids, place.group_ids)


def _find(place: Place, key: str) -> Plan[MemoryEntry | None]:
    """The entry under this namespace and key: the server's by-key read when it answers with that entry
    (it prefers the caller's own), else the entries with that key, narrowed by the server."""
    stored = place.key(key)
    try:
        entry: MemoryEntry = yield calls.get_memory_by_key(place.user_id, stored, place.group_ids)
    except NotFoundError:
        return None
    if place.holds(entry):
        return entry
    listing: calls.ListOptions = {**place.narrowing(), "key_prefix": stored}
    entries: list[MemoryEntry] = yield calls.list_memories(place.user_id, listing)
    return next((e for e in entries if e["key"] == stored and place.holds(e)), None)


def _get(op: GetOp, user_index: int | None) -> Plan[Item | None]:
    place = Place.of(op.namespace, user_index=user_index)
    entry = yield from _find(place, op.key)
    if entry is None:
        return None
    yield from _refresh(place, [entry], op.refresh_ttl)
    return Item(
        value=entry["value"],
        key=op.key,
        namespace=op.namespace,
        created_at=_time(entry["createdAt"]),
        updated_at=_time(entry["updatedAt"]),
    )


def _store_turn() -> str:
    """A turn of its own for each put. A store has no turns: the code that calls it writes, not an LLM's
    turn, so its puts must not count against the agent's ``maxWritesPerTurn``, which bounds what an LLM
    writes in one turn, nor share the 60-second window of an LLM's writes without a turn id. The server's
    rule is unchanged (every door's turn id is its caller's word), and so is the LLM tools' limit: their turn
    is the invoke's ``turnId``, else that window."""
    return f"store-{uuid.uuid4().hex}"


def _put(op: PutOp, category: str, user_index: int | None) -> Plan[None]:
    place = Place.of(op.namespace, user_index=user_index)
    if op.value is None:
        entry = yield from _find(place, op.key)
        if entry is not None:
            with contextlib.suppress(NotFoundError):  # gone meanwhile: the wanted outcome
                yield calls.delete_memory(entry["id"])
        return None
    options: calls.UpsertOptions = {
        "category": category,
        "visibility": place.visibility or "self",
        "turn_id": _store_turn(),
    }
    if place.group_ids:
        options["group_ids"] = place.group_ids
    if op.ttl is not None:
        options["ttl_seconds"] = max(1, round(op.ttl * 60))  # LangGraph's TTLs are in minutes
    yield calls.upsert_memory(place.user_id, place.key(op.key), op.value, options)
    return None


def _search(op: SearchOp, user_index: int | None) -> Plan[list[SearchItem]]:
    place = Place.of(op.namespace_prefix, prefix=True, user_index=user_index)
    listing: calls.SearchOptions = {**place.narrowing(), "limit": op.limit, "offset": op.offset}
    if op.filter:
        listing["filter"] = dict(op.filter)
    if op.query:
        listing["mode"] = "hybrid"
        entries: list[MemoryEntry] = yield calls.search_memories(place.user_id, op.query, listing)
    else:
        entries = yield calls.list_memories(place.user_id, listing)
    yield from _refresh(place, entries, op.refresh_ttl)
    prefix = MatchCondition(match_type="prefix", path=op.namespace_prefix)
    found: list[SearchItem] = []
    for entry in entries:
        namespaces, key = place.namespaces_of(entry)
        namespace = next((ns for ns in namespaces if _matches(ns, prefix)), namespaces[0])
        found.append(
            SearchItem(
                namespace=namespace,
                key=key,
                value=entry["value"],
                created_at=_time(entry["createdAt"]),
                updated_at=_time(entry["updatedAt"]),
                score=entry.get("score"),
            )
        )
    return found


def _condition_labels(
    place: Place, conditions: Sequence[MatchCondition]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The prefix's and the suffix's elements that are labels or scope: the prefix without the user, the
    suffix from after its last element that may be the user (``*`` or the user id, close enough to its
    start)."""
    prefix = next(tuple(c.path) for c in conditions if c.match_type == "prefix")
    at = place.user_at
    suffix = next((tuple(c.path) for c in conditions if c.match_type == "suffix"), ())
    # the user is preceded by the root and the labels before it, at most: so is it in the suffix
    could_be_user = (i for i, part in enumerate(suffix) if part in (WILDCARD, place.user_id) and i <= at)
    cut = max((i + 1 for i in could_be_user), default=0)
    return prefix[:at] + prefix[at + 1 :], suffix[cut:]


def _list_namespaces(op: ListNamespacesOp, user_index: int | None) -> Plan[list[tuple[str, ...]]]:
    conditions = op.match_conditions or ()
    prefixes = [c for c in conditions if c.match_type == "prefix"]
    if not prefixes:
        raise ValueError("list_namespaces needs prefix=(user_id, ...) naming the user.")
    path = tuple(prefixes[0].path)
    place = Place.of(path, prefix=True, user_index=user_index)
    listing: calls.ListOptions = {"limit": SCAN_LIMIT}
    wildcards = WILDCARD in path or any(c.match_type == "suffix" for c in conditions)
    if not wildcards:
        listing.update(place.narrowing())
    call = calls.list_memories(place.user_id, listing)
    patterns = key_patterns(*_condition_labels(place, conditions)) if wildcards else None
    if patterns == []:  # no key can meet them
        return []
    if patterns:  # the server matches the wildcards (the list's keyPattern: any of them)
        call = dataclasses.replace(call, params=[*call.params, *(("keyPattern", p) for p in patterns)])
    entries: list[MemoryEntry] = yield call
    namespaces: set[tuple[str, ...]] = set()
    for entry in entries:
        for namespace in place.namespaces_of(entry)[0]:
            if all(_matches(namespace, condition) for condition in conditions):
                namespaces.add(namespace[: op.max_depth] if op.max_depth else namespace)
    return sorted(namespaces)[op.offset : op.offset + op.limit]


class MemoryPlatformStore(BaseStore):
    """A LangGraph ``BaseStore`` over memoryplatform (see the module's namespace table).

    ``MemoryPlatformStore(MemoryPlatform(url, api_key=key), AsyncMemoryPlatform(url, api_key=key))``; without
    an async client, ``abatch`` runs ``batch`` in a thread. New entries get ``category`` (``fact``: it must be
    one of the agent policy's allowed categories). ``ttl`` is LangGraph's ``TTLConfig``: ``default_ttl``
    (minutes) for a ``put`` without one, ``refresh_on_read`` for reads that do not say. ``user_index``: the
    user's position in every namespace, the other elements all labels (``1`` for ``("profiles", user_id)``
    or ``("users", user_id, "memories")``); without it, the element next to ``"memories"``
    (:func:`user_position`), any other layout refused.
    """

    supports_ttl = True

    def __init__(
        self,
        client: MemoryPlatform,
        async_client: AsyncMemoryPlatform | None = None,
        *,
        category: str = "fact",
        ttl: TTLConfig | None = None,
        user_index: int | None = None,
    ) -> None:
        if user_index is not None and user_index < 0:
            raise ValueError("user_index is a position in the namespace: 0 or more.")
        self.client = client
        self.async_client = async_client
        self.category = category
        self.ttl_config = ttl
        self.user_index = user_index

    def place(self, namespace: tuple[str, ...]) -> Place:
        """Where this store puts the items of ``namespace`` (its user, labels and scope)."""
        return Place.of(namespace, user_index=self.user_index)

    def _plan(self, op: Op) -> Plan[Result]:
        if isinstance(op, GetOp):
            return _get(op, self.user_index)
        if isinstance(op, PutOp):
            return _put(op, self.category, self.user_index)
        if isinstance(op, SearchOp):
            return _search(op, self.user_index)
        if isinstance(op, ListNamespacesOp):
            return _list_namespaces(op, self.user_index)
        raise TypeError(f"Unknown store operation: {op!r}")

    def _run(self, plan: Plan[T]) -> T:
        try:
            call = next(plan)
            while True:
                try:
                    answer = self.client.send(call)
                except APIError as exc:
                    call = plan.throw(exc)
                else:
                    call = plan.send(answer)
        except StopIteration as done:
            return done.value

    async def _arun(self, plan: Plan[T]) -> T:
        assert self.async_client is not None  # noqa: S101 (abatch checks it)
        try:
            call = next(plan)
            while True:
                try:
                    answer = await self.async_client.send(call)
                except APIError as exc:
                    call = plan.throw(exc)
                else:
                    call = plan.send(answer)
        except StopIteration as done:
            return done.value

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        return [self._run(self._plan(op)) for op in ops]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        if self.async_client is None:
            return await asyncio.to_thread(self.batch, list(ops))
        return [await self._arun(self._plan(op)) for op in ops]


_LANGCHAIN_ROLES = {"human": "user", "user": "user", "ai": "assistant", "assistant": "assistant"}


def _role_and_text(message: Any) -> tuple[str | None, str]:
    """A message of a graph's state (a LangChain message or a ``{"role", "content"}`` dict): its role as
    extraction names it (``None``: not a user or assistant message) and its text."""
    if isinstance(message, dict):
        role, content = message.get("role") or message.get("type"), message.get("content")
    else:
        role, content = getattr(message, "type", None), getattr(message, "content", None)
    if isinstance(content, list):
        content = "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
    return _LANGCHAIN_ROLES.get(str(role)), content.strip() if isinstance(content, str) else ""


def turn_messages(messages: Sequence[Any]) -> list[ExtractMessage]:
    """The last turn: the user and assistant messages from the last user message on (at most 50)."""
    turn: list[ExtractMessage] = []
    for message in messages:
        role, text = _role_and_text(message)
        if role == "user":
            turn = []
        if role and text:
            turn.append({"role": role, "content": text})
    return turn[-50:]


DOCS_NAMESPACE = ("{user_id}", "memories")  # LangGraph's docs' layout, as a template


def _namespace_of(template: tuple[str, ...], configurable: dict[str, Any]) -> tuple[str, ...] | None:
    """The namespace of this run: each ``{name}`` of ``template`` filled from ``config["configurable"]``
    (``None``: a name the run does not give)."""
    try:
        return tuple(part.format_map(configurable) for part in template)
    except KeyError:
        return None


def extraction_node(
    client: MemoryPlatform,
    *,
    namespace: tuple[str, ...] = DOCS_NAMESPACE,
    store: MemoryPlatformStore | None = None,
    messages_key: str = "messages",
    **options: Unpack[calls.ExtractOptions],
) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A graph node (opt-in, after the agent's node) that sends the turn's messages to the server's
    extraction and writes the facts as items of ``namespace``, where the graph reads them
    (``store.search(namespace)``, ``store.get(namespace, key)``).

    ``namespace`` is a template: each ``{name}`` is filled from ``config["configurable"]`` (default
    ``("{user_id}", "memories")``, LangGraph's docs' layout); any layout the store takes, ending in
    ``"global"`` or ``("group", group_id)`` for those scopes, mapped as ``store`` maps it (its
    ``user_index``; default: the graph's store when it is a :class:`MemoryPlatformStore`, else the default
    layouts). The writes are the ``client``'s key's, all of one run in one turn (``turn_id``, else a new
    one). It is one extraction on the server, each fact with its provenance (the model, the extraction, the
    messages) in its history, as every door's. ``options`` as :meth:`MemoryPlatform.extract` takes them, but
    the namespace decides the visibility, the groups and the key prefix; ``dry_run=True`` writes nothing.
    It changes no state; a failed extraction or write is logged and never fails the run."""
    for decided in ("visibility", "group_ids", "key_prefix"):
        if decided in options:
            raise ValueError(
                f"extraction_node: the namespace decides {decided}; its labels are the key prefix, and "
                "ending it with 'global' or ('group', group_id) sets those scopes."
            )

    def node(state: dict[str, Any]) -> dict[str, Any]:
        spelled = _namespace_of(namespace, get_config().get("configurable", {}))
        turn = turn_messages(state.get(messages_key) or [])
        if spelled is None or not turn:
            return {}
        graph_store = get_store()  # None when the graph has none
        layout = store or (graph_store if isinstance(graph_store, MemoryPlatformStore) else None)
        place = Place.of(spelled, user_index=layout.user_index if layout else None)
        _extract_into(client, place, turn, options)
        return {}

    return node


def _extract_into(
    client: MemoryPlatform, place: Place, turn: list[ExtractMessage], options: calls.ExtractOptions
) -> None:
    """One extraction of ``turn`` into ``place``: the server puts each fact's key under the place's labels
    (``key_prefix``) in its scope, compares them with the entries there, and writes them with the
    extraction's provenance (the model, the extraction, the messages), all in one turn of writes."""
    asked: calls.ExtractOptions = {
        **options,
        "visibility": place.visibility or "self",
        "turn_id": options.get("turn_id") or f"extract-{uuid.uuid4().hex}",
    }
    if place.labels:
        asked["key_prefix"] = place.key_prefix
    if place.group_ids:
        asked["group_ids"] = place.group_ids
    try:
        client.extract(place.user_id, turn, **asked)
    except MemoryPlatformError as exc:
        logger.warning("Extraction after the turn failed: %s", exc)
