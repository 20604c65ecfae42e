"""Conflict sets, as staff settle them: the entries of one user whose values disagree on one key, joined with
their partners by meaning (``city`` = Berlin against ``home_town`` = Hamburg is one set, not two).

Staff keep one value (the others take it, or are deleted), or say the set is not a conflict: each pair of its
values is then a :class:`~usermemory.models.ConflictDismissal`, which Dream's contradiction passes respect
(:func:`dismissed_pair`, :func:`dismissed_pairs_of`), so the next run does not flag it again."""

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from apikeys.caller import Caller
from memoryplatform.errors import BadRequest, Forbidden, NotFound
from memoryplatform.locks import LockId, advisory_xact_lock
from usermemory.embedding import embeddings_schedule
from usermemory.history import Actor, EventLog, Scope
from usermemory.models import ConflictDismissal, MemoryEntry, MemoryEvent
from usermemory.searchtext import search_columns

SETTLE_MODES = ("update", "delete", "dismiss")
MAX_SET_ENTRIES = 200  # a set's entries on one page; a user with more sees the first


@dataclass
class ConflictSet:
    user_id: str
    keys: list[str]
    entries: list[MemoryEntry] = field(default_factory=list)

    @property
    def entry_ids(self) -> list[int]:
        return [e.id for e in self.entries]


def conflict_sets_of(entries: Iterable[Any]) -> list[list[Any]]:
    """Group entries (objects with ``id``, ``user_id``, ``key``, ``meaning_conflicts``) into sets: one user's
    entries on one key, joined with the keys of their partners by meaning. Sets in first-seen order."""
    entries = list(entries)
    parent: dict[tuple[str, str], tuple[str, str]] = {}

    def find(node: tuple[str, str]) -> tuple[str, str]:
        parent.setdefault(node, node)
        while parent[node] != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    key_of = {e.id: (e.user_id, e.key) for e in entries}
    for entry in entries:
        find((entry.user_id, entry.key))
        for partner in entry.meaning_conflicts or []:
            other = key_of.get(partner)
            if other is not None:
                parent[find(other)] = find((entry.user_id, entry.key))
    groups: dict[tuple[str, str], list[Any]] = defaultdict(list)
    for entry in entries:
        groups[find((entry.user_id, entry.key))].append(entry)
    return list(groups.values())


def conflict_sets_page(*, query: str, page: int, users_per_page: int) -> tuple[list[ConflictSet], bool]:
    """The conflict sets of one page of users with flagged entries (ordered by user id; the partial index
    ``memory_conflicted_idx`` finds them), each set with its partners by meaning, flagged or not. Returns
    the sets and whether another page follows."""
    flagged = MemoryEntry.objects.filter(conflicted=True)
    if query:
        flagged = flagged.filter(Q(user_id=query) | Q(key__icontains=query))
    start = (page - 1) * users_per_page
    users = list(
        flagged.order_by("user_id")
        .values_list("user_id", flat=True)
        .distinct()[start : start + users_per_page + 1]
    )
    has_next = len(users) > users_per_page
    users = users[:users_per_page]
    rows = list(
        flagged.filter(user_id__in=users)
        .select_related("source_agent")
        .order_by("user_id", "key", "-updated_at")
    )
    seen = {e.id for e in rows}
    partner_ids = {p for e in rows for p in e.meaning_conflicts or []} - seen
    rows += list(MemoryEntry.objects.filter(id__in=partner_ids).select_related("source_agent"))
    sets = [
        ConflictSet(
            user_id=group[0].user_id, keys=sorted({e.key for e in group}), entries=group[:MAX_SET_ENTRIES]
        )
        for group in conflict_sets_of(rows)
    ]
    sets.sort(key=lambda s: (s.user_id, s.keys))
    return sets, has_next


def conflict_sets_open() -> int:
    """How many conflict sets are open: the sets the Conflicts page lists (:func:`conflict_sets_page`, no
    search), the one count the overview and Dream's runs show too.

    Each (user, key) with a flagged entry is a set of its own (counted by the partial index
    ``memory_conflicted_idx``), except where entries are partners by meaning: those users' sets are grouped
    as the page groups them, from their flagged entries and partners, which are few."""
    flagged = MemoryEntry.objects.filter(conflicted=True)
    keys = flagged.values_list("user_id", "key").distinct().count()
    linked = flagged.exclude(meaning_conflicts=[]).values_list("user_id", flat=True).distinct()
    fields = ("id", "user_id", "key", "meaning_conflicts")
    rows = list(flagged.filter(user_id__in=linked).only(*fields))
    if not rows:
        return keys
    seen = {e.id for e in rows}
    partner_ids = {p for e in rows for p in e.meaning_conflicts or []} - seen
    alone = len({(e.user_id, e.key) for e in rows})  # counted in ``keys``, one set each
    rows += list(MemoryEntry.objects.filter(id__in=partner_ids).only(*fields))
    return keys - alone + len(conflict_sets_of(rows))


def _pair(a: MemoryEntry, b: MemoryEntry) -> tuple[str, str, str, str]:
    first, second = sorted([(a.key, a.value_text), (b.key, b.value_text)])
    return (*first, *second)


def dismissed_pairs_of(*, user_ids: Iterable[str]) -> set[tuple[str, str, str, str, str]]:
    """The dismissed pairs of these users: (user, key a, text a, key b, text b), a before b."""
    rows = ConflictDismissal.objects.filter(user_id__in=set(user_ids)).values_list(
        "user_id", "key_a", "text_a", "key_b", "text_b"
    )
    return set(rows)


def dismissed_pair() -> Exists:
    """For a subquery over the other entries of an entry's set (the entry is ``OuterRef(OuterRef(...))``): a
    dismissal names this pair, in either order."""

    def outer(name: str) -> OuterRef:
        return OuterRef(OuterRef(name))

    this_first = Q(
        key_a=outer("key"), text_a=outer("value_text"), key_b=OuterRef("key"), text_b=OuterRef("value_text")
    )
    other_first = Q(
        key_a=OuterRef("key"), text_a=OuterRef("value_text"), key_b=outer("key"), text_b=outer("value_text")
    )
    return Exists(ConflictDismissal.objects.filter(this_first | other_first, user_id=outer("user_id")))


def _settled_value(entry: MemoryEntry, keep: MemoryEntry | None, mode: str) -> Any:
    """An entry's value once its set is settled (history's new value); None: deleted."""
    if keep is None or mode == "dismiss" or entry.id == keep.id:
        return entry.value
    return None if mode == "delete" else keep.value


def _dismiss_pairs(*, user_id: str, entries: list[MemoryEntry], actor_id: str) -> None:
    """Record every pair of the set's values as not a conflict (Dream's passes by key and meaning skip it)."""
    pairs = {
        _pair(a, b)
        for i, a in enumerate(entries)
        for b in entries[i + 1 :]
        if a.value_text != b.value_text or a.key != b.key
    }
    dismissals = [
        ConflictDismissal(
            user_id=user_id, key_a=p[0], text_a=p[1], key_b=p[2], text_b=p[3], dismissed_by=actor_id
        )
        for p in pairs
    ]
    ConflictDismissal.objects.bulk_create(dismissals, ignore_conflicts=True)


def _take_value(*, keep: MemoryEntry, others: list[MemoryEntry], now: datetime) -> None:
    """Give ``others`` the kept entry's value; each keeps its key, and the value's search columns follow."""
    for entry in others:
        columns = search_columns(key=entry.key, text=keep.value_text)
        MemoryEntry.objects.filter(id=entry.id).update(
            value=keep.value,
            value_text=columns.value_text,
            key_folded=columns.key_folded,
            text_folded=columns.text_folded,
            updated_at=now,
        )


@transaction.atomic
def memory_settle_conflict(
    *, caller: Caller, user_id: str, entry_ids: list[int], keep_entry_id: int | None, mode: str
) -> dict[str, int]:
    """Settle one conflict set of ``user_id`` (its entries ``entry_ids``, any keys). ``update``: the others
    take the kept entry's value; ``delete``: the others are deleted; ``dismiss``: nothing changes but every
    pair of the set's values is recorded as not a conflict, so Dream leaves it alone. Each entry gets a
    ``resolved`` event, its flag and partners by meaning are cleared. The value staff keep is observed now
    (time order: a message older than the settling does not write over it)."""
    if not caller.is_admin:
        raise Forbidden("Settling conflicts needs an admin key or a staff user.")
    if mode not in SETTLE_MODES:
        raise BadRequest(f"mode must be one of {', '.join(SETTLE_MODES)}.")
    advisory_xact_lock(LockId.USER_MEMORY, user_id)
    entries = list(
        MemoryEntry.objects.select_for_update().filter(user_id=user_id, id__in=entry_ids).order_by("id")
    )
    if not entries:
        raise NotFound(f"No entries of user '{user_id}' in this set: it changed since; reload the page.")
    keep = next((e for e in entries if e.id == keep_entry_id), None)
    if keep is None and mode != "dismiss":
        raise BadRequest("Pick the value to keep, or say the set is not a conflict.")
    now = timezone.now()
    log = EventLog(Actor.of(caller))
    others = [e for e in entries if keep is None or e.id != keep.id]
    for entry in entries:
        log.add(
            MemoryEvent.Action.RESOLVED,
            entry_id=entry.id,
            user_id=user_id,
            key=entry.key,
            old=entry.value,
            new=_settled_value(entry, keep, mode),
            at=now,
            scope=Scope.of(entry),
        )
    ids = [e.id for e in entries]
    other_ids = [e.id for e in others]
    if mode == "dismiss":
        _dismiss_pairs(user_id=user_id, entries=entries, actor_id=log.actor.actor_id)
    elif mode == "delete":
        MemoryEntry.objects.filter(id__in=other_ids).delete()
    elif keep is not None:
        _take_value(keep=keep, others=others, now=now)
    if keep is not None and mode != "dismiss":  # staff say which value holds now: no older one reverts it
        chosen = [keep.id, *(other_ids if mode == "update" else [])]
        MemoryEntry.objects.filter(id__in=chosen).update(observed_at=now)
    MemoryEntry.objects.filter(id__in=ids).update(conflicted=False, meaning_conflicts=[])
    log.flush()
    if mode == "update":
        embeddings_schedule(entry_ids=other_ids)  # they took the kept value
    return {
        "kept": keep.id if keep is not None else 0,
        "updated": len(others) if mode == "update" else 0,
        "deleted": len(others) if mode == "delete" else 0,
        "dismissed": len(entries) if mode == "dismiss" else 0,
    }
