"""LangGraph adapter (extra ``langgraph``): :class:`MemoryPlatformStore`, a ``BaseStore`` over a user's
memories, with sync ``batch`` and async ``abatch``.

Namespaces map to users and visibility; the key is the memory's key, the value its (JSON object) value:

| namespace | memories |
|---|---|
| ``("memories", user_id)`` | the agent's own ``self`` entries |
| ``("memories", user_id, "global")`` | the user's ``global`` entries (every agent reads them) |
| ``("memories", user_id, "group", group_id)`` | ``group`` entries shared with that group |

The agent is the key's: use an agent key. ``search`` with a ``query`` uses the platform's ``hybrid`` search
(meaning and words, each item with a ``score``); without one it lists the user's entries, newest first.
``search`` and ``list_namespaces`` need a prefix that names the user: ``("memories", user_id, ...)``.
A search or listing looks at the newest 1,000 entries the agent can see of that user.

Opt-in memory formation: add :func:`extraction_node` to a graph after the agent's node, and after each turn
the turn's messages (from the last user message on) go to the server's extraction, whose facts about the
user land in the store's namespaces (``self`` by default). The user is ``config["configurable"]["user_id"]``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Generator, Iterable, Sequence
from datetime import datetime
from typing import Any, TypeVar

from langgraph.config import get_config
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
)

from memoryplatform_client import _calls as calls
from memoryplatform_client._async import AsyncMemoryPlatform
from memoryplatform_client._core import Call
from memoryplatform_client._sync import MemoryPlatform
from memoryplatform_client.errors import APIError, MemoryPlatformError, NotFoundError
from memoryplatform_client.types import ExtractMessage, MemoryEntry, Visibility

logger = logging.getLogger(__name__)

ROOT = "memories"
SCAN_LIMIT = 1000  # the server's largest page

T = TypeVar("T")
# A store operation as a generator: it yields the calls it needs and gets their answers (or their errors)
# back, so that one definition serves the sync and the async store.
Plan = Generator[Call[Any], Any, T]


class Scope:
    """A namespace's place: the user, the visibility and the group."""

    def __init__(self, namespace: tuple[str, ...]) -> None:
        if len(namespace) < 2 or namespace[0] != ROOT:
            raise ValueError(f"A namespace starts with ({ROOT!r}, user_id): got {namespace!r}.")
        self.user_id = namespace[1]
        self.visibility: Visibility
        self.group_id: str | None
        rest = namespace[2:]
        if rest == ():
            self.visibility, self.group_id = "self", None
        elif rest == ("global",):
            self.visibility, self.group_id = "global", None
        elif len(rest) == 2 and rest[0] == "group":
            self.visibility, self.group_id = "group", rest[1]
        else:
            raise ValueError(
                f"Unknown namespace {namespace!r}: use ({ROOT!r}, user), ({ROOT!r}, user, 'global') or "
                f"({ROOT!r}, user, 'group', group_id)."
            )

    @property
    def group_ids(self) -> list[str] | None:
        return [self.group_id] if self.group_id else None

    def holds(self, entry: MemoryEntry) -> bool:
        if entry["visibility"] != self.visibility:
            return False
        return self.group_id is None or self.group_id in entry["groupIds"]


def namespaces_of(entry: MemoryEntry) -> list[tuple[str, ...]]:
    """The namespaces an entry is found under (a group entry under each of its groups)."""
    user = entry["userId"]
    if entry["visibility"] == "global":
        return [(ROOT, user, "global")]
    if entry["visibility"] == "group":
        return [(ROOT, user, "group", group) for group in entry["groupIds"]]
    return [(ROOT, user)]


def _time(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def _value(entry: MemoryEntry) -> dict[str, Any]:
    value = entry["value"]
    return dict(value) if isinstance(value, dict) else {"value": value}


def _item(entry: MemoryEntry, namespace: tuple[str, ...]) -> Item:
    return Item(
        value=_value(entry),
        key=entry["key"],
        namespace=namespace,
        created_at=_time(entry["createdAt"]),
        updated_at=_time(entry["updatedAt"]),
    )


_OPERATORS = {
    "$eq": lambda a, b: a == b,
    "$ne": lambda a, b: a != b,
    "$gt": lambda a, b: a is not None and a > b,
    "$gte": lambda a, b: a is not None and a >= b,
    "$lt": lambda a, b: a is not None and a < b,
    "$lte": lambda a, b: a is not None and a <= b,
}


def matches_filter(value: dict[str, Any], conditions: dict[str, Any] | None) -> bool:
    """LangGraph's ``filter``: each field equal to a value, or meeting ``{"$eq"|"$ne"|"$gt"|...: value}``."""
    for name, wanted in (conditions or {}).items():
        actual = value.get(name)
        if isinstance(wanted, dict) and wanted and all(op in _OPERATORS for op in wanted):
            if not all(_OPERATORS[op](actual, operand) for op, operand in wanted.items()):
                return False
        elif actual != wanted:
            return False
    return True


def _matches(namespace: tuple[str, ...], condition: MatchCondition) -> bool:
    path = tuple(condition.path)
    if len(path) > len(namespace):
        return False
    part = (
        namespace[: len(path)]
        if condition.match_type == "prefix"
        else namespace[len(namespace) - len(path) :]
    )
    return all(want == "*" or want == got for want, got in zip(path, part, strict=True))


def _find(scope: Scope, key: str) -> Plan[MemoryEntry | None]:
    """The entry under this namespace and key: the server's by-key read when it answers with that entry
    (it prefers the caller's own), else the user's newest entries."""
    try:
        entry: MemoryEntry = yield calls.get_memory_by_key(scope.user_id, key, scope.group_ids)
    except NotFoundError:
        return None
    if scope.holds(entry):
        return entry
    listing: calls.ListOptions = {"limit": SCAN_LIMIT}
    if scope.group_ids:
        listing["group_ids"] = scope.group_ids
    entries: list[MemoryEntry] = yield calls.list_memories(scope.user_id, listing)
    return next((e for e in entries if e["key"] == key and scope.holds(e)), None)


def _get(op: GetOp) -> Plan[Item | None]:
    entry = yield from _find(Scope(op.namespace), op.key)
    return _item(entry, op.namespace) if entry else None


def _put(op: PutOp, category: str) -> Plan[None]:
    scope = Scope(op.namespace)
    if op.value is None:
        entry = yield from _find(scope, op.key)
        if entry is not None:
            with contextlib.suppress(NotFoundError):  # gone meanwhile: the wanted outcome
                yield calls.delete_memory(entry["id"])
        return None
    options: calls.UpsertOptions = {"category": category, "visibility": scope.visibility}
    if scope.group_ids:
        options["group_ids"] = scope.group_ids
    yield calls.upsert_memory(scope.user_id, op.key, dict(op.value), options)
    return None


def _user_scope(prefix: tuple[str, ...]) -> tuple[str, list[str] | None]:
    """The user a prefix names, and the group to read in when it names one."""
    if len(prefix) < 2 or prefix[0] != ROOT or prefix[1] == "*":
        raise ValueError(f"A search or listing needs a prefix naming the user: ({ROOT!r}, user_id, ...).")
    group = [prefix[3]] if len(prefix) >= 4 and prefix[2] == "group" and prefix[3] != "*" else None
    return prefix[1], group


def _search(op: SearchOp) -> Plan[list[SearchItem]]:
    user_id, group_ids = _user_scope(op.namespace_prefix)
    listing: calls.SearchOptions = {"limit": SCAN_LIMIT}
    if group_ids:
        listing["group_ids"] = group_ids
    if op.query:
        listing["mode"] = "hybrid"
        entries: list[MemoryEntry] = yield calls.search_memories(user_id, op.query, listing)
    else:
        entries = yield calls.list_memories(user_id, listing)
    found: list[SearchItem] = []
    prefix = MatchCondition(match_type="prefix", path=op.namespace_prefix)
    for entry in entries:
        namespace = next((ns for ns in namespaces_of(entry) if _matches(ns, prefix)), None)
        if namespace is None or not matches_filter(_value(entry), op.filter):
            continue
        found.append(
            SearchItem(
                namespace=namespace,
                key=entry["key"],
                value=_value(entry),
                created_at=_time(entry["createdAt"]),
                updated_at=_time(entry["updatedAt"]),
                score=entry.get("score"),
            )
        )
    return found[op.offset : op.offset + op.limit]


def _list_namespaces(op: ListNamespacesOp) -> Plan[list[tuple[str, ...]]]:
    prefixes = [c for c in op.match_conditions or () if c.match_type == "prefix"]
    if not prefixes:
        raise ValueError(f"list_namespaces needs prefix=({ROOT!r}, user_id, ...) naming the user.")
    user_id, group_ids = _user_scope(tuple(prefixes[0].path))
    listing: calls.ListOptions = {"limit": SCAN_LIMIT}
    if group_ids:
        listing["group_ids"] = group_ids
    entries: list[MemoryEntry] = yield calls.list_memories(user_id, listing)
    namespaces: set[tuple[str, ...]] = set()
    for entry in entries:
        for namespace in namespaces_of(entry):
            if all(_matches(namespace, condition) for condition in op.match_conditions or ()):
                namespaces.add(namespace[: op.max_depth] if op.max_depth else namespace)
    return sorted(namespaces)[op.offset : op.offset + op.limit]


class MemoryPlatformStore(BaseStore):
    """A LangGraph ``BaseStore`` over memoryplatform (see the module's namespace table).

    ``MemoryPlatformStore(MemoryPlatform(url, api_key=key), AsyncMemoryPlatform(url, api_key=key))``; without
    an async client, ``abatch`` runs ``batch`` in a thread. New entries get ``category`` (``fact``: it must be
    one of the agent policy's allowed categories).
    """

    supports_ttl = False

    def __init__(
        self,
        client: MemoryPlatform,
        async_client: AsyncMemoryPlatform | None = None,
        *,
        category: str = "fact",
    ) -> None:
        self.client = client
        self.async_client = async_client
        self.category = category

    def _plan(self, op: Op) -> Plan[Result]:
        if isinstance(op, GetOp):
            return _get(op)
        if isinstance(op, PutOp):
            return _put(op, self.category)
        if isinstance(op, SearchOp):
            return _search(op)
        if isinstance(op, ListNamespacesOp):
            return _list_namespaces(op)
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


def extraction_node(
    client: MemoryPlatform, *, messages_key: str = "messages", **options: Any
) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A graph node (opt-in, after the agent's node) that sends the turn's messages to extraction for the
    user of ``config["configurable"]["user_id"]``; ``options`` as :meth:`MemoryPlatform.extract` takes them.
    It changes no state; a failed extraction is logged and never fails the run."""

    def node(state: dict[str, Any]) -> dict[str, Any]:
        user_id = get_config().get("configurable", {}).get("user_id")
        turn = turn_messages(state.get(messages_key) or [])
        if not user_id or not turn:
            return {}
        try:
            client.extract(str(user_id), turn, **options)
        except MemoryPlatformError as exc:
            logger.warning("Extraction after the turn failed: %s", exc)
        return {}

    return node
