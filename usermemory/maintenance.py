"""Maintenance writes of entries, the services Dream calls: a batch pruned or flagged, a group superseded by
summaries, partners by meaning recorded, old turn counters deleted. Like every write of an entry, each leaves
its history events; the batch statements are in :mod:`usermemory.sql.write`."""

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from memoryplatform.batches import delete_in_batches
from memoryplatform.locks import LockId, advisory_xact_lock
from usermemory.embedding import embeddings_schedule
from usermemory.history import Actor, EventLog, Scope, history_announce
from usermemory.models import MemoryEntry, MemoryEntryGroup, MemoryEvent, TurnWriteCount, Visibility
from usermemory.searchtext import search_columns, value_as_text
from usermemory.selectors import current_q
from usermemory.sql import write


@transaction.atomic
def memory_prune_batch(*, ids: list[int], actor_id: str, at: datetime) -> int:
    """Delete the entries ``ids`` (their group rows too), each with a ``pruned`` event by Dream that keeps
    its last value. Returns how many were deleted."""
    write.write_events(
        ids=ids,
        action=MemoryEvent.Action.PRUNED,
        value_column="old_value",
        actor_type=MemoryEvent.ActorType.DREAM,
        actor_id=actor_id,
        at=at,
    )
    history_announce()
    return write.delete_entries(ids=ids)


@transaction.atomic
def memory_flag_batch(*, ids: list[int], conflicted: bool, actor_id: str, at: datetime) -> int:
    """Set ``conflicted`` on the entries ``ids``, each with a ``flagged`` (or ``unflagged``) event by Dream.
    Returns how many entries changed."""
    write.write_events(
        ids=ids,
        action=MemoryEvent.Action.FLAGGED if conflicted else MemoryEvent.Action.UNFLAGGED,
        value_column="new_value",
        actor_type=MemoryEvent.ActorType.DREAM,
        actor_id=actor_id,
        at=at,
    )
    history_announce()
    return MemoryEntry.objects.filter(id__in=ids).update(conflicted=conflicted)


@dataclass(frozen=True)
class Replacement:
    """A new entry that supersedes ``sources``: its ``key`` (``key_if_taken`` when the user already has an
    entry on that upsert key), its text, and its provenance."""

    key: str
    key_if_taken: str
    text: str
    sources: list[int]
    provenance: dict[str, Any]


def _key_taken(*, user_id: str, key: str, scope: Scope) -> bool:
    """Whether the user has an entry on the upsert key ``key`` in ``scope`` (global, or the owner's)."""
    taken = MemoryEntry.objects.filter(user_id=user_id, key=key)
    if scope.visibility == Visibility.GLOBAL:
        taken = taken.filter(visibility=Visibility.GLOBAL)
    else:
        taken = taken.exclude(visibility=Visibility.GLOBAL).filter(source_agent_id=scope.owner)
    return taken.exists()


def _replacement_create(
    *,
    user_id: str,
    scope: Scope,
    category: str,
    replacement: Replacement,
    provenance: dict[str, Any],
    now: datetime,
) -> MemoryEntry:
    """The new entry of ``replacement`` and its group rows."""
    key = replacement.key
    if _key_taken(user_id=user_id, key=key, scope=scope):
        key = replacement.key_if_taken
    entry = MemoryEntry.objects.create(
        user_id=user_id,
        key=key,
        value=replacement.text,
        **search_columns(key=key, text=value_as_text(replacement.text))._asdict(),
        category=category,
        visibility=scope.visibility,
        source_agent_id=scope.owner,
        group_ids=scope.group_ids,
        created_at=now,
        updated_at=now,
        valid_from=now,
        provenance=provenance,
    )
    if scope.group_ids:
        MemoryEntryGroup.objects.bulk_create(
            [MemoryEntryGroup(entry=entry, user_id=user_id, group_id=g) for g in scope.group_ids]
        )
    return entry


@transaction.atomic
def memory_supersede(
    *,
    user_id: str,
    scope: Scope,
    category: str,
    replacements: list[Replacement],
    sources_read: Mapping[int, datetime],
    actor: Actor,
    record_agents: bool,
) -> int:
    """Write the ``replacements`` (in ``scope``, under ``category``) and supersede their sources, in one
    transaction under the user's lock: a ``created`` event per new entry, a ``superseded`` event per source,
    and ``supersededBy``/``validTo`` on the sources. With ``record_agents`` each new entry's provenance
    names the agents of its sources.

    Compare-and-set: ``sources_read`` holds every source's ``updated_at`` as the caller read it. Returns how
    many entries were superseded, or 0, writing nothing, when any source changed, went, stopped being
    current or is itself a replacement since."""
    now = timezone.now()
    named = sorted({entry_id for r in replacements for entry_id in r.sources})
    advisory_xact_lock(LockId.USER_MEMORY, user_id)
    current = {
        e.id: e
        for e in MemoryEntry.objects.select_for_update().filter(
            current_q(), id__in=named, provenance__isnull=True
        )
    }
    if not all(i in current and current[i].updated_at == sources_read[i] for i in named):
        return 0
    log = EventLog(actor)
    written = []
    for replacement in replacements:
        provenance = dict(replacement.provenance)
        if record_agents:
            provenance["agents"] = sorted(
                {str(current[i].source_agent_id) for i in replacement.sources if current[i].source_agent_id}
            )
        entry = _replacement_create(
            user_id=user_id,
            scope=scope,
            category=category,
            replacement=replacement,
            provenance=provenance,
            now=now,
        )
        log.add(
            MemoryEvent.Action.CREATED,
            entry_id=entry.id,
            user_id=user_id,
            key=entry.key,
            new=replacement.text,
            at=now,
            scope=scope,
        )
        write.write_events(
            ids=replacement.sources,
            action=MemoryEvent.Action.SUPERSEDED,
            value_column="old_value",
            actor_type=actor.actor_type,
            actor_id=actor.actor_id,
            at=now,
        )
        MemoryEntry.objects.filter(id__in=replacement.sources).update(superseded_by=entry, valid_to=now)
        written.append(entry.id)
    log.flush()
    embeddings_schedule(entry_ids=written)  # after the commit
    return len(named)


def meaning_conflicts_record(*, scope: Q, partners: Mapping[int, set[int]]) -> int:
    """Record each entry's partners by meaning (``partners``: entry id -> the ids it contradicts) in
    ``meaning_conflicts``, and empty it on the other current entries of the users ``scope`` (a filter of
    entries) selects. One update per entry that changes, each committed on its own (each sets a final
    value, so a repeat writes the same). Returns how many entries changed."""
    updated = 0
    users = MemoryEntry.objects.filter(current_q()).filter(scope).values("user_id").distinct()
    stale = MemoryEntry.objects.filter(current_q(), user_id__in=users).exclude(meaning_conflicts=[])
    for entry_id in stale.exclude(id__in=list(partners)).values_list("id", flat=True):
        updated += MemoryEntry.objects.filter(id=entry_id).update(meaning_conflicts=[])
    for entry_id, others in partners.items():
        wanted = sorted(others)
        updated += (
            MemoryEntry.objects.filter(id=entry_id)
            .exclude(meaning_conflicts=wanted)
            .update(meaning_conflicts=wanted)
        )
    return updated


def turn_counts_prune(*, before: datetime, batch_size: int) -> int:
    """Delete the per-turn write counters whose turn began before ``before``, ``batch_size`` rows per
    transaction. Returns how many were deleted."""
    return delete_in_batches(TurnWriteCount.objects.filter(window_start__lt=before), batch_size=batch_size)
