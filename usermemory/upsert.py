"""Upserts: every rule of a write (identity, group membership, guardrails, turns, caps), one entry, a batch,
and the legacy property map, each through one statement of :mod:`usermemory.sql.write`."""

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from apikeys.caller import Caller
from apikeys.models import Agent
from apikeys.services import caller_require_writer
from memoryplatform.batches import batch_size_check
from memoryplatform.errors import BadRequest, CapacityReached, Forbidden, RateLimited
from memoryplatform.locks import LockId, advisory_xact_lock
from memoryplatform.text import is_blank
from usermemory import metrics, selectors
from usermemory.embedding import embeddings_schedule
from usermemory.history import SCOPE_FIELDS, Actor, EventLog, Scope
from usermemory.models import (
    MAX_KEY_CHARS,
    AgentMemoryPolicy,
    MemoryEntry,
    MemoryEntryGroup,
    MemoryEvent,
    OnCapReached,
    Visibility,
)
from usermemory.searchtext import value_as_text
from usermemory.sql.write import EntryWrite, Stored, Upserted, turn_count, upsert_with_event
from usermemory.writerules import (
    MemoryWrite,
    check_guardrails,
    check_insight,
    check_storable,
    check_value_size,
    with_expiry,
    with_observed_at,
)

MAX_BATCH = 100
PROPERTY_CATEGORY = "property"
LEGACY_SKIPPED_KEYS = frozenset({"_id", "userId"})
# Django builds a choices class's ``values`` list anew on every access; every upsert and recall checks these.
VISIBILITIES = frozenset(Visibility.values)


# --- Inputs and outputs ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Skipped:
    """Time order: a write not written, because the stored value says something observed later."""

    observed_at: datetime  # the write's
    stored_observed_at: datetime  # the stored value's, which stays

    @property
    def reason(self) -> str:
        return (
            f"the stored value was observed at {self.stored_observed_at.isoformat()}, after this one "
            f"({self.observed_at.isoformat()}): an older observation does not replace a newer one"
        )


@dataclass
class UpsertResult:
    entry: MemoryEntry
    created: bool
    unchanged: bool = False  # asked with ``skip_unchanged``: nothing was written, ``entry`` is the stored one
    skipped: Skipped | None = None  # time order: nothing was written, ``entry`` is the stored one

    @property
    def result(self) -> str:
        """What the write did, as metrics count it: created, updated or skipped."""
        if self.skipped is not None:
            return "skipped"
        return "created" if self.created else "updated"


# --- Rules shared by every write ---------------------------------------------------------------------


def _resolve_owner(caller: Caller, write: MemoryWrite) -> str | None:
    """The agent that owns the write. An agent key is always its own agent."""
    if caller.is_agent:
        if write.source_agent_id and write.source_agent_id != caller.agent_id:
            raise Forbidden(
                f"An agent key for '{caller.agent_id}' cannot write as agent '{write.source_agent_id}'."
            )
        return caller.agent_id
    if write.source_agent_id:
        if not Agent.objects.filter(id=write.source_agent_id).exists():
            raise BadRequest(f"sourceAgentId: no agent '{write.source_agent_id}'.")
        return write.source_agent_id
    if write.visibility != Visibility.GLOBAL:
        raise BadRequest(
            f"sourceAgentId is required for a '{write.visibility}' write with a {caller.role} key."
        )
    return None


def _resolve_groups(caller: Caller, write: MemoryWrite, owner: str | None, memo: "_BatchMemo") -> list[str]:
    groups = list(dict.fromkeys(write.group_ids or []))
    if caller.is_agent and (groups or write.visibility == Visibility.GROUP):
        member_of = memo.groups_of(caller.acting_agent_id)
        outside = sorted(set(groups) - set(member_of))
        if outside:
            raise Forbidden(
                f"Agent '{owner}' is not a member of group(s): {', '.join(outside)}.",
                details={"groups": outside},
            )
        if write.visibility == Visibility.GROUP and not groups:
            groups = member_of
    if write.visibility == Visibility.GROUP and not groups:
        raise BadRequest("A 'group' memory needs groupIds (the agent is in no group to default to).")
    return groups


def _cap_refusal(*, user_id: str, owner: str | None, cap: int, count: int, why: str) -> CapacityReached:
    """The 409 of a full user. The cap counts only the owner's entries of the user (issue 53): nothing the
    writing agent cannot see, so the count is told to every caller."""
    whose = f"agent '{owner}' holds" if owner else "entries with no owning agent number"
    where = f"For user '{user_id}', {whose} {count}; the limit (maxEntriesPerUser) is {cap}"
    return CapacityReached(f"{where}; {why}", details={"limit": "maxEntriesPerUser", "max": cap})


def _make_room(
    *,
    policy: AgentMemoryPolicy,
    user_id: str,
    owner: str | None,
    count: int,
    log: EventLog,
    now: datetime,
) -> None:
    """Before a new entry (user's lock held, ``count`` of the owner's entries of the user): keep the owner at
    or under the cap, evicting only its oldest entry."""
    cap = policy.max_entries_per_user
    if count < cap:
        return
    if policy.on_cap_reached == OnCapReached.REJECT:
        raise _cap_refusal(
            user_id=user_id, owner=owner, cap=cap, count=count, why="onCapReached is 'reject'."
        )
    # One entry out per entry in, whatever the count: the owner's entries never grow, and an owner over the
    # cap (it was lowered) shrinks as entries are replaced.
    oldest = (
        MemoryEntry.objects.filter(user_id=user_id, source_agent_id=owner)
        .order_by("updated_at", "id")
        .values("id", "key", "value", *SCOPE_FIELDS)
        .first()
        if owner
        else None
    )
    if oldest is None:
        why = "evict_oldest cannot make room: the write has no owning agent (sourceAgentId) to evict from."
        raise _cap_refusal(user_id=user_id, owner=owner, cap=cap, count=count, why=why)
    MemoryEntry.objects.filter(id=oldest["id"]).delete()
    log.add(
        MemoryEvent.Action.EVICTED,
        entry_id=oldest["id"],
        user_id=user_id,
        key=oldest["key"],
        old=oldest["value"],
        at=now,
        scope=Scope.of(oldest),
    )


def _lock_user(*, caller: Caller, user_id: str) -> None:
    """Every upsert holds the user's lock: upserts of one user run one at a time, so the existing entry, the
    cap count and the eviction all stay true until commit. An agent's write takes it in the turn count."""
    if not caller.is_agent:
        advisory_xact_lock(LockId.USER_MEMORY, user_id)


@dataclass
class _BatchMemo:
    """Per-call lookups that do not change within one (batch) upsert: policies and group memberships; and the
    turn's count of each user's writes (:meth:`count_turn_write`)."""

    caller: Caller
    policies: dict[str | None, AgentMemoryPolicy] = field(default_factory=dict)
    groups: dict[str, list[str]] = field(default_factory=dict)
    writes_per_user: Counter[str] = field(default_factory=Counter)  # a batch's writes of each user
    turn_counts: dict[str, int] = field(default_factory=dict)

    def count_turn_write(self, *, user_id: str, turn_id: str | None, limit: int, now: datetime) -> None:
        """Count one write of the caller's agent in its current turn for this user, refusing one past
        ``limit``. A batch counts all its writes of a user in one statement, at the first of them (which
        has passed its checks), and each is checked at its own position.

        Writes without a turn id share a 60-second window. A refused write's count stays in the rolled-back
        transaction, so the count stays at the limit. The statement first takes the user's advisory lock,
        which every upsert holds (see :func:`_lock_user`)."""
        if user_id not in self.turn_counts:
            writes = self.writes_per_user[user_id] or 1
            cutoff = now - timedelta(seconds=60) if not turn_id else datetime.min.replace(tzinfo=now.tzinfo)
            after = turn_count(
                agent_id=self.caller.acting_agent_id,
                user_id=user_id,
                turn_id=turn_id or "",
                now=now,
                cutoff=cutoff,
                writes=writes,
            )
            self.turn_counts[user_id] = after - writes
        self.turn_counts[user_id] += 1
        if self.turn_counts[user_id] > limit:
            raise RateLimited(
                f"Write limit reached: {limit} memory writes per turn (maxWritesPerTurn).",
                details={"limit": "maxWritesPerTurn", "max": limit},
            )

    def policy_of(self, agent_id: str | None) -> AgentMemoryPolicy:
        if agent_id not in self.policies:
            self.policies[agent_id] = selectors.policy_for_caller(caller=self.caller, agent_id=agent_id)
        return self.policies[agent_id]

    def groups_of(self, agent_id: str) -> list[str]:
        if agent_id not in self.groups:
            self.groups[agent_id] = selectors.agent_group_ids(agent_id=agent_id)
        return self.groups[agent_id]


def _upsert_one(
    *,
    caller: Caller,
    write: MemoryWrite,
    turn_id: str | None,
    log: EventLog,
    now: datetime,
    memo: _BatchMemo,
    system_category: bool = False,
    skip_unchanged: bool = False,
) -> UpsertResult:
    if write.visibility not in VISIBILITIES:
        raise BadRequest(f"visibility must be one of {', '.join(Visibility.values)}.")
    if is_blank(write.user_id) or is_blank(write.key):  # "\u200b" shows nothing, as "" and "  " do
        raise BadRequest(
            "userId and key are required: a text of white space or invisible characters is blank."
        )
    if len(write.key) > MAX_KEY_CHARS or len(write.user_id) > 255:
        raise BadRequest(f"key and userId are at most {MAX_KEY_CHARS} characters.")
    check_storable(write)
    write = with_observed_at(with_expiry(write, now), now)
    check_insight(write)
    text = value_as_text(write.value)
    check_value_size(text)
    owner = _resolve_owner(caller, write)
    groups = _resolve_groups(caller, write, owner, memo)
    policy = memo.policy_of(owner)
    if caller.is_agent:
        check_guardrails(policy, write, text, system_category=system_category)
    if skip_unchanged and (stored := _stored_unchanged(write=write, owner=owner, groups=groups, now=now)):
        return UpsertResult(entry=stored, created=False, unchanged=True)
    if caller.is_agent:
        memo.count_turn_write(
            user_id=write.user_id, turn_id=turn_id, limit=policy.max_writes_per_turn, now=now
        )
    _lock_user(caller=caller, user_id=write.user_id)
    # Without a time given, observed as it is written: after the user's lock, so in commit order.
    observed = write.observed_at or timezone.now()
    write = replace(write, observed_at=observed)
    upserted = _write_entry(
        write=write, owner=owner, groups=groups, text=text, policy=policy, log=log, now=now
    )
    if upserted.kept is not None:  # time order: the stored value is newer, and stays
        stored = MemoryEntry.objects.get(id=upserted.kept.entry_id)
        skipped = Skipped(observed_at=observed, stored_observed_at=stored.observed_at)
        return UpsertResult(entry=stored, created=False, skipped=skipped)
    written, old_groups = upserted.stored, upserted.old_groups
    if written is None:  # _write_entry refuses a write the cap stopped
        raise RuntimeError("an upsert wrote nothing and kept nothing")
    entry_id = written.entry_id
    created = old_groups is None
    if created or old_groups != groups:
        if not created:
            MemoryEntryGroup.objects.filter(entry_id=entry_id).delete()
        if groups:
            MemoryEntryGroup.objects.bulk_create(
                [MemoryEntryGroup(entry_id=entry_id, user_id=write.user_id, group_id=g) for g in groups]
            )
    entry = _entry_written(write=write, written=written, groups=groups, text=text, now=now)
    return UpsertResult(entry=entry, created=created)


def _entry_written(
    *, write: MemoryWrite, written: Stored, groups: list[str], text: str, now: datetime
) -> MemoryEntry:
    """The entry as the upsert left it, built from the write and the statement's answer (no read)."""
    return MemoryEntry(
        id=written.entry_id,
        user_id=write.user_id,
        key=write.key,
        value=write.value,
        value_text=text,
        category=written.category,
        visibility=write.visibility,
        source_agent_id=written.owner,
        group_ids=groups,
        source_conversation_id=write.source_conversation_id,
        confidence=write.confidence,
        source=write.source,
        conflicted=False,
        access_count=written.access_count,
        created_at=written.created_at,
        updated_at=now,
        last_accessed_at=written.last_accessed_at,
        valid_from=now,
        valid_to=write.valid_to,
        ttl_seconds=write.ttl_seconds,
        superseded_by_id=None,
        observed_at=write.observed_at or now,
    )


def _canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _stored_unchanged(
    *, write: MemoryWrite, owner: str | None, groups: list[str], now: datetime
) -> MemoryEntry | None:
    """The entry on the write's upsert key when the write would change nothing of it: the entry is current
    (not superseded, not expired) and holds the same value, category, visibility, groups, conversation,
    confidence, source and expiry (the same ``validTo``, or the same ``ttlSeconds``: a TTL is not renewed).
    The ``conflicted`` flag is not compared: writing the same value again settles no conflict.

    Read before the user's lock, so the answer is true as of the read: a concurrent write that lands after it
    is ordered after this no-op, as it would be after a write of the same value."""
    on_key = MemoryEntry.objects.filter(user_id=write.user_id, key=write.key)
    if write.visibility == Visibility.GLOBAL:
        on_key = on_key.filter(visibility=Visibility.GLOBAL)
    else:
        on_key = on_key.filter(source_agent_id=owner).exclude(visibility=Visibility.GLOBAL)
    entry = next(iter(on_key[:1]), None)  # at most one row: the upsert key is unique
    if entry is None or entry.superseded_by_id is not None:
        return None
    if entry.valid_to is not None and entry.valid_to <= now:
        return None
    if write.ttl_seconds is not None:
        same_expiry = entry.ttl_seconds == write.ttl_seconds
    else:
        same_expiry = entry.ttl_seconds is None and entry.valid_to == write.valid_to
    same = (
        same_expiry
        and entry.visibility == write.visibility
        and (write.category is None or entry.category == write.category)
        and sorted(entry.group_ids) == sorted(groups)
        and entry.source_conversation_id == write.source_conversation_id
        and entry.confidence == write.confidence
        and entry.source == write.source
        and _canonical_json(entry.value) == _canonical_json(write.value)
    )
    return entry if same else None


def _write_entry(
    *,
    write: MemoryWrite,
    owner: str | None,
    groups: list[str],
    text: str,
    policy: AgentMemoryPolicy,
    log: EventLog,
    now: datetime,
) -> Upserted:
    """Read the entry, check the cap, upsert and write history in one statement
    (:func:`usermemory.sql.write.upsert_with_event`). When the cap stops a new entry, make room (or refuse)
    and run it again. Returns what the statement did: the stored entry and its groups before (``None``: it
    is new), or the entry kept because its value was observed later."""
    actor = log.actor
    entry = EntryWrite(
        user_id=write.user_id,
        key=write.key,
        value=write.value,
        text=text,
        category=write.category,
        new_category=PROPERTY_CATEGORY,
        visibility=write.visibility,
        owner=owner,
        group_ids=groups,
        conversation_id=write.source_conversation_id,
        confidence=write.confidence,
        source=write.source,
        provenance=write.provenance,
        cap=policy.max_entries_per_user,
        actor_type=actor.actor_type,
        actor_id=actor.actor_id,
        key_prefix=actor.key_prefix,
        now=now,
        valid_to=write.valid_to,
        ttl_seconds=write.ttl_seconds,
        observed_at=write.observed_at,
    )

    def attempt(cap: int) -> Upserted:
        return upsert_with_event(replace(entry, cap=cap))

    written = attempt(policy.max_entries_per_user)
    if written.kept is not None:
        return written
    if written.stored is None:  # no entry on the key, and the user is at the cap
        _make_room(
            policy=policy,
            user_id=write.user_id,
            owner=owner,
            count=written.count,
            log=log,
            now=now,
        )
        # One evicted, one in: room for one more than the user has now (the user's lock is held).
        written = attempt(written.count)
    if written.stored is None:
        why = f"onCapReached is '{policy.on_cap_reached}'."
        cap = policy.max_entries_per_user
        raise _cap_refusal(user_id=write.user_id, owner=owner, cap=cap, count=written.count, why=why)
    return written


# --- Writes ------------------------------------------------------------------------------------------


@transaction.atomic
def memory_upsert(
    *,
    caller: Caller,
    write: MemoryWrite,
    turn_id: str | None = None,
    system_category: bool = False,
    skip_unchanged: bool = False,
    schedule_vectors: bool = True,
) -> UpsertResult:
    """Insert or update one entry on its upsert key. 201-worthy ``created`` tells which happened.
    ``system_category``: the platform chose the category (a task's result), so the agent's
    ``allowedCategories`` does not refuse it; no door lets a caller set it. ``skip_unchanged``: when the
    stored entry already holds what the write says (:func:`_stored_unchanged`), write nothing (no event, no
    turn counted, no new ``updatedAt``) and answer ``unchanged`` with the stored entry, after every rule
    has passed (an import run twice: :mod:`usermemory.importing`). Time order: a write observed
    (``observedAt``) before the stored value on its key was writes nothing and answers ``skipped``, with
    the stored entry and both times; the database decides it, on the row the upsert locks.
    ``schedule_vectors=False``: the caller schedules the entry's vector itself (:func:`embeddings_schedule`),
    with the rest of its batch."""
    caller_require_writer(caller)
    log = EventLog(Actor.of(caller))
    result = _upsert_one(
        caller=caller,
        write=write,
        turn_id=turn_id,
        log=log,
        now=timezone.now(),
        memo=_BatchMemo(caller),
        system_category=system_category,
        skip_unchanged=skip_unchanged,
    )
    if result.unchanged:
        return result
    metrics.count_upserts([result.result])
    if result.skipped:
        return result
    log.flush()
    if schedule_vectors:
        embeddings_schedule(entry_ids=[result.entry.id])  # after the commit, off the statement
    return result


def memory_batch_check(*, count: int) -> None:
    """A batch holds 1 to ``MAX_BATCH`` entries. Doors call it before parsing the entries, to refuse early."""
    batch_size_check(count=count, most=MAX_BATCH, items="entries", empty="A batch needs at least one entry.")


@transaction.atomic
def memory_upsert_batch(
    *, caller: Caller, writes: Sequence[MemoryWrite], turn_id: str | None = None
) -> list[UpsertResult]:
    """Up to 100 upserts, all or nothing. A refusal names the failing index and writes nothing. An entry whose
    stored value was observed later is skipped, with the others written (time order: its result's
    ``skipped``)."""
    caller_require_writer(caller)
    memory_batch_check(count=len(writes))
    for user_id in sorted({w.user_id for w in writes}):  # one lock order, so batches never deadlock
        advisory_xact_lock(LockId.USER_MEMORY, user_id)
    log = EventLog(Actor.of(caller))
    now = timezone.now()
    memo = _BatchMemo(caller)
    memo.writes_per_user.update(w.user_id for w in writes)
    results = []
    for index, write in enumerate(writes):
        try:
            results.append(
                _upsert_one(caller=caller, write=write, turn_id=turn_id, log=log, now=now, memo=memo)
            )
        except (BadRequest, Forbidden, CapacityReached, RateLimited) as exc:
            exc.message = f"entries[{index}]: {exc.message}"
            exc.details = {**exc.details, "index": index}
            raise
    log.flush()
    written = [r.entry.id for r in results if r.skipped is None]
    embeddings_schedule(entry_ids=written)  # after the commit, off the statements
    metrics.count_upserts(r.result for r in results)
    return results


@transaction.atomic
def properties_merge(
    *, caller: Caller, user_id: str, properties: dict[str, Any], turn_id: str | None = None
) -> list[UpsertResult]:
    """Upsert each key as a global entry, category ``property`` on insert; skips ``_id`` and ``userId``."""
    writes = [
        MemoryWrite(
            user_id=user_id,
            key=key,
            value=value,
            category=None,
            visibility=Visibility.GLOBAL,
            source_agent_id=caller.agent_id,
        )
        for key, value in properties.items()
        if key not in LEGACY_SKIPPED_KEYS
    ]
    if not writes:
        return []
    return memory_upsert_batch(caller=caller, writes=writes, turn_id=turn_id)
