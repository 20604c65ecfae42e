"""Governance: agents' memory policies, GDPR erasure and export (with the apps that register their per-user
data), staff resolving conflicts and correcting a value."""

import logging
from collections.abc import Callable
from typing import Any

from django.db import transaction
from django.utils import timezone

from apikeys.caller import Caller
from apikeys.models import Agent
from memoryplatform import replica
from memoryplatform.errors import BadRequest, Forbidden, NotFound
from memoryplatform.locks import LockId, advisory_xact_lock
from usermemory.conflicts import memory_settle_conflict
from usermemory.export import user_export
from usermemory.history import NO_AGENT, Actor, EventLog
from usermemory.models import (
    AgentMemoryPolicy,
    ConflictDismissal,
    MemoryEntry,
    MemoryEntryGroup,
    MemoryEvent,
    OnCapReached,
    RecallOrder,
    TurnWriteCount,
)
from usermemory.policies import FieldGroups, PolicyPart, policy_parts
from usermemory.selectors import policy_values
from usermemory.upsert import MemoryWrite, UpsertResult, memory_upsert

logger = logging.getLogger(__name__)
RECALL_ORDERS = frozenset(RecallOrder.values)


# --- Policy -------------------------------------------------------------------------------------------

# Usermemory's part of the policy, in the groups (and order) the admin shows them. The apps above add theirs
# (usermemory.policies), each in its own table; the service writes every part, in one transaction.
POLICY_FIELD_GROUPS: FieldGroups = (
    (None, ("max_entries_per_user", "max_recall_entries", "recall_top_k", "recall_order", "on_cap_reached")),
    ("Guardrails", ("max_key_length", "max_value_length", "max_writes_per_turn", "allowed_categories")),
    ("Keys by meaning", ("semantic_contradiction_threshold",)),
)


def check_memory_policy(policy: AgentMemoryPolicy) -> None:
    """Usermemory's part holds together (the REST serializer bounds each field; this holds at every door)."""
    if min(policy.max_recall_entries, policy.max_entries_per_user, policy.recall_top_k) < 1:
        raise BadRequest("maxRecallEntries, recallTopK and maxEntriesPerUser must be at least 1.")
    if policy.recall_order not in RECALL_ORDERS:
        raise BadRequest(f"recallOrder must be one of {', '.join(RecallOrder.values)}.")
    if policy.on_cap_reached not in OnCapReached.values:
        raise BadRequest(f"onCapReached must be one of {', '.join(OnCapReached.values)}.")
    if not 0 < policy.semantic_contradiction_threshold <= 1:
        raise BadRequest("semanticContradictionThreshold must be in (0, 1].")


MEMORY_POLICY = PolicyPart(
    name="memory", model=AgentMemoryPolicy, groups=POLICY_FIELD_GROUPS, check=check_memory_policy
)


@transaction.atomic
def policy_update(*, agent_id: str, **changes: Any) -> dict[str, Any]:
    """Change an agent's policy, every part it names in one transaction (a part's row made with its defaults
    on its first change), and return the whole policy as :func:`usermemory.selectors.policy_values` reads it.

    The agent's row is locked first, so two changes of one agent's policy take turns, and a row is made by
    ``get_or_create`` on the part's primary key (the agent): the database settles two first changes at once.
    A part whose values do not hold together (its ``check``) is a :class:`BadRequest`: nothing is saved."""
    parts = policy_parts()
    unknown = set(changes) - {name for part in parts for name in part.fields}
    if unknown:
        raise BadRequest(f"Unknown policy fields: {', '.join(sorted(unknown))}.")
    # FOR NO KEY UPDATE: writes of entries that name the agent (FOR KEY SHARE) need not wait.
    if not list(
        Agent.objects.select_for_update(no_key=True).filter(id=agent_id).values_list("id", flat=True)
    ):
        raise NotFound(f"No agent '{agent_id}'.")
    for part in parts:
        named = {name: value for name, value in changes.items() if name in part.fields}
        if not named:
            continue
        row, _ = part.model._default_manager.select_for_update().get_or_create(pk=agent_id)
        for name, value in named.items():
            setattr(row, name, value)
        if part.check is not None:
            part.check(row)
        row.save()
    return policy_values(agent_id=agent_id)


# --- GDPR ---------------------------------------------------------------------------------------------

Eraser = Callable[[str], dict[str, int]]
Exporter = Callable[[str], dict[str, Any]]
_erasers: dict[str, Eraser] = {}
_exporters: dict[str, Exporter] = {}


def register_user_data(name: str, *, eraser: Eraser, exporter: Exporter) -> None:
    """Let an app that keeps per-user data (conversations) take part in erasure and export."""
    _erasers[name] = eraser
    _exporters[name] = exporter


@transaction.atomic
def memory_erase_user(*, caller: Caller, user_id: str) -> dict[str, Any]:
    """GDPR erasure (admin only): every entry, history event and turn counter of the user, and the data of
    every registered app (first, while the user's entries still exist: Dream finds its records of them by
    their ids). Returns what it removed."""
    if not caller.is_admin:
        raise Forbidden("GDPR erasure needs an admin key.")
    advisory_xact_lock(LockId.USER_MEMORY, user_id)
    replica.erasure_committed()  # a lagging replica serves none of the user's data after this commits
    apps = {name: eraser(user_id) for name, eraser in _erasers.items()}
    entries = MemoryEntry.objects.filter(user_id=user_id)
    entries_deleted = entries.count()
    MemoryEntryGroup.objects.filter(user_id=user_id).delete()
    entries.delete()
    events_deleted, _ = MemoryEvent.objects.filter(user_id=user_id).delete()
    TurnWriteCount.objects.filter(user_id=user_id).delete()
    dismissals_deleted, _ = ConflictDismissal.objects.filter(user_id=user_id).delete()
    report: dict[str, Any] = {
        "userId": user_id,
        "entriesDeleted": entries_deleted,
        "eventsDeleted": events_deleted,
        "conflictDismissalsDeleted": dismissals_deleted,
        **apps,
    }
    log = EventLog(Actor.of(caller))
    log.add(
        MemoryEvent.Action.ERASED,
        entry_id=None,
        user_id=user_id,
        key="",
        new={"entriesDeleted": entries_deleted},
        at=timezone.now(),
        scope=NO_AGENT,
    )
    log.flush()
    logger.info("GDPR erasure of a user: %s entries, %s events", entries_deleted, events_deleted)
    return report


def memory_export_user(*, caller: Caller, user_id: str) -> dict[str, Any]:
    """GDPR export (admin only): all of the user's data as JSON, in the versioned format of
    :mod:`usermemory.export`, with the part of every registered app."""
    if not caller.is_admin:
        raise Forbidden("GDPR export needs an admin key.")
    export = user_export(user_id=user_id)
    for name, exporter in _exporters.items():
        export[name] = exporter(user_id)
    return export


# --- Conflicts ------------------------------------------------------------------------------------------

RESOLVE_MODES = ("update", "delete")


@transaction.atomic
def memory_resolve_conflict(
    *, caller: Caller, user_id: str, key: str, keep_entry_id: int, mode: str = "update"
) -> dict[str, int]:
    """Settle a (user, key) set whose entries disagree: keep one entry's value, and either give the others
    that value (``update``) or delete them (``delete``): :func:`usermemory.conflicts.memory_settle_conflict`
    over the set's entries."""
    if not caller.is_admin:
        raise Forbidden("Resolving conflicts needs an admin key or a staff user.")
    if mode not in RESOLVE_MODES:
        raise BadRequest(f"mode must be one of {', '.join(RESOLVE_MODES)}.")
    ids = list(MemoryEntry.objects.filter(user_id=user_id, key=key).values_list("id", flat=True))
    if keep_entry_id not in ids:
        raise NotFound(f"Entry {keep_entry_id} is not in the set of user '{user_id}', key '{key}'.")
    return memory_settle_conflict(
        caller=caller, user_id=user_id, entry_ids=ids, keep_entry_id=keep_entry_id, mode=mode
    )


# --- Corrections ----------------------------------------------------------------------------------------


@transaction.atomic
def memory_correct(*, caller: Caller, entry_id: int, value: Any) -> UpsertResult:
    """Staff (or an admin key) correct one entry's value: the same upsert as every write, on the entry's own
    upsert key, keeping its owner, visibility, groups, category and insight fields, so every check on a value
    holds and history records an ``updated`` event naming the caller (the staff user's name)."""
    if not caller.is_admin:
        raise Forbidden("Correcting a value needs an admin key or a staff user.")
    entry = MemoryEntry.objects.filter(id=entry_id).first()
    if entry is None:
        raise NotFound(f"No memory entry {entry_id}.")
    if entry.superseded_by_id is not None:
        raise BadRequest("This entry was superseded by a Dream summary; correct the summary instead.")
    write = MemoryWrite(
        user_id=entry.user_id,
        key=entry.key,
        value=value,
        category=entry.category,
        visibility=entry.visibility,
        source_agent_id=entry.source_agent_id,
        group_ids=list(entry.group_ids or []),
        source_conversation_id=entry.source_conversation_id,
        valid_to=entry.valid_to if entry.valid_to and entry.valid_to > timezone.now() else None,
        confidence=entry.confidence,
        source=entry.source,
    )
    return memory_upsert(caller=caller, write=write)
