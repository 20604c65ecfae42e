"""Every rule of user memory, the one door the REST views, the admin, LLM tools, MCP tools and other apps
call: deletes, forget and recall here; upserts in :mod:`usermemory.upsert`; policies, GDPR and conflicts in
:mod:`usermemory.governance`, whose public names this module re-exports."""

from datetime import datetime, timedelta
from typing import NamedTuple

from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from apikeys.caller import Caller
from apikeys.services import caller_require_writer
from memoryplatform import publicids
from memoryplatform.errors import BadRequest, Forbidden
from usermemory import metrics, selectors
from usermemory import ranking as ranking_
from usermemory.conflicts import SETTLE_MODES, memory_settle_conflict
from usermemory.governance import (
    POLICY_FIELD_GROUPS,
    RESOLVE_MODES,
    memory_correct,
    memory_erase_user,
    memory_export_user,
    memory_resolve_conflict,
    policy_update,
    register_user_data,
)
from usermemory.history import SCOPE_FIELDS, Actor, EventLog, Scope, register_history_listener
from usermemory.models import (
    MemoryEntry,
    MemoryEvent,
    RecallOrder,
    Visibility,
)
from usermemory.ranking import RankedSearch
from usermemory.sql import recall as recall_sql
from usermemory.sql import search as search_sql
from usermemory.sql import write as write_sql
from usermemory.sql.base import EntryRow, RecallScope
from usermemory.sql.search import NO_FILTERS, Filters
from usermemory.upsert import (
    LEGACY_SKIPPED_KEYS,
    MAX_BATCH,
    PROPERTY_CATEGORY,
    MemoryWrite,
    Skipped,
    UpsertResult,
    memory_batch_check,
    memory_upsert,
    memory_upsert_batch,
    properties_merge,
    value_as_text,
)
from usermemory.writerules import MAX_TTL_SECONDS

__all__ = [
    "LEGACY_SKIPPED_KEYS",
    "MAX_BATCH",
    "MAX_RECALL_LIMIT",
    "MAX_TTL_REFRESH",
    "MAX_TTL_SECONDS",
    "POLICY_FIELD_GROUPS",
    "PROPERTY_CATEGORY",
    "RESOLVE_MODES",
    "SETTLE_MODES",
    "MemoryWrite",
    "Skipped",
    "UpsertResult",
    "memory_batch_check",
    "memory_correct",
    "memory_delete",
    "memory_erase_user",
    "memory_export_user",
    "memory_forget_key",
    "memory_recall",
    "memory_recall_as_of",
    "memory_recall_ranked",
    "memory_resolve_conflict",
    "memory_settle_conflict",
    "memory_ttl_refresh",
    "memory_upsert",
    "memory_upsert_batch",
    "policy_update",
    "properties_delete",
    "properties_merge",
    "recall_split",
    "register_history_listener",
    "register_user_data",
    "value_as_text",
]

MAX_RECALL_LIMIT = 1000
RECALL_ORDERS = frozenset(RecallOrder.values)


@transaction.atomic
def memory_delete(*, caller: Caller, entry_id: int) -> None:
    """Delete one entry. An agent may delete only entries it owns. An entry it may not read is a 404, the same
    as an id that does not exist, so no answer confirms that a hidden entry exists; an entry it reads but does
    not own (another agent's global or group entry) is a 403."""
    caller_require_writer(caller)
    entry = MemoryEntry.objects.select_for_update().filter(id=entry_id).first()
    if entry is not None and caller.is_agent and entry.source_agent_id != caller.agent_id:
        selectors.memory_get_readable(caller=caller, entry_id=entry_id)  # 404 when hidden
        public_id = publicids.to_public(publicids.ENTRY, entry_id)
        raise Forbidden(f"Memory entry {public_id} is not owned by agent '{caller.agent_id}'.")
    if entry is None:
        raise selectors.entry_not_found(entry_id)
    log = EventLog(Actor.of(caller))
    log.add(
        MemoryEvent.Action.DELETED,
        entry_id=entry.id,
        user_id=entry.user_id,
        key=entry.key,
        old=entry.value,
        at=timezone.now(),
        scope=Scope.of(entry),
    )
    entry.delete()
    log.flush()


def _delete_owned(*, caller: Caller, entries: QuerySet[MemoryEntry]) -> int:
    """Delete these entries (an agent: only the ones it owns), each with a ``deleted`` event."""
    caller_require_writer(caller)
    if caller.is_agent:
        entries = entries.filter(source_agent_id=caller.agent_id)
    rows = list(entries.select_for_update().values("id", "user_id", "key", "value", *SCOPE_FIELDS))
    log = EventLog(Actor.of(caller))
    now = timezone.now()
    for row in rows:
        log.add(
            MemoryEvent.Action.DELETED,
            entry_id=row["id"],
            user_id=row["user_id"],
            key=row["key"],
            old=row["value"],
            at=now,
            scope=Scope.of(row),
        )
    MemoryEntry.objects.filter(id__in=[row["id"] for row in rows]).delete()
    log.flush()
    return len(rows)


MAX_TTL_REFRESH = 1000


@transaction.atomic
def memory_ttl_refresh(
    *, caller: Caller, user_id: str, entry_ids: list[int], group_ids: list[str] | None = None
) -> int:
    """Renew the TTL of the user's entries ``entry_ids``: each one valid now that the caller may write (as
    an upsert would: :func:`usermemory.selectors.memory_writable_for`) and that a write gave a TTL is valid
    again until now plus that TTL. Others are left as they are. Like an access mark it changes no value,
    so it writes no history event. Returns how many were renewed."""
    caller_require_writer(caller)
    if len(entry_ids) > MAX_TTL_REFRESH:
        raise BadRequest(f"At most {MAX_TTL_REFRESH} ids per refresh.")
    writable = selectors.memory_writable_for(caller=caller, user_id=user_id, group_ids=group_ids)
    renew = list(writable.filter(id__in=entry_ids, ttl_seconds__isnull=False).values_list("id", flat=True))
    return write_sql.ttl_renew(ids=renew, now=timezone.now()) if renew else 0


@transaction.atomic
def memory_forget_key(*, caller: Caller, user_id: str, key: str) -> int:
    """Delete the caller's own entries with this key for the user (LLM ``forgetFact``); returns how many."""
    return _delete_owned(caller=caller, entries=MemoryEntry.objects.filter(user_id=user_id, key=key))


# --- Recall ------------------------------------------------------------------------------------------


def recall_split(limit: int) -> int:
    """How many of ``limit`` most_accessed slots are reserved for the most recent entries."""
    return max(1, limit // 5) if limit > 1 else 0


class _RecallPlan(NamedTuple):
    agent_id: str
    groups: selectors.Groups
    order: str
    limit: int
    now: datetime
    threshold: datetime  # lastAccessedAt older than this moves to now

    def scope(self, *, caller: Caller, user_id: str, min_confidence: float | None) -> RecallScope:
        """What the recall reads of ``user_id``'s entries; the ``conflicted`` flag an agent may see, the
        stored one for viewer and admin keys."""
        return RecallScope(
            user_id=user_id,
            agent_id=self.agent_id,
            group_ids=self.groups,
            order=self.order,
            threshold=self.threshold,
            now=self.now,
            agent_view=caller.is_agent,
            min_confidence=min_confidence,
        )


def _recall_plan(
    *,
    caller: Caller,
    agent_id: str | None,
    group_ids: list[str] | None,
    order: str | None,
    limit: int | None,
    by_relevance: bool = False,
) -> _RecallPlan:
    """Whom a recall is for (the agent-key rules), its order (the policy's unless given), its limit (the
    one asked, else the policy's ``recallTopK`` by relevance and ``maxRecallEntries`` in order; at most
    ``maxRecallEntries``) and when it marks the access."""
    agent_id, groups = selectors.resolve_read_scope(
        caller=caller, agent_id=agent_id, group_ids=group_ids, require_agent=True
    )
    policy = selectors.policy_for_caller(caller=caller, agent_id=agent_id)
    order = order or policy.recall_order
    if order not in RECALL_ORDERS:
        raise BadRequest(f"order must be one of {', '.join(RecallOrder.values)}.")
    if limit is not None and not 1 <= limit <= MAX_RECALL_LIMIT:
        raise BadRequest(f"limit must be between 1 and {MAX_RECALL_LIMIT}.")
    default = policy.recall_top_k if by_relevance else policy.max_recall_entries
    limit = min(limit or default, policy.max_recall_entries)
    now = timezone.now()
    threshold = now - timedelta(seconds=settings.MEMORY_ACCESS_GRANULARITY)
    return _RecallPlan(agent_id, groups, order, limit, now, threshold)


def memory_recall(
    *,
    caller: Caller,
    user_id: str,
    agent_id: str | None = None,
    group_ids: list[str] | None = None,
    order: str | None = None,
    limit: int | None = None,
    min_confidence: float | None = None,
) -> list[EntryRow]:
    """The entries visible to the agent, in its policy's order and limit; counts the access of each.

    One statement (:func:`usermemory.sql.recall.recall`) picks the entries, counts their access, sets
    ``lastAccessedAt`` where it is older than the granularity, and returns them as they now are: the fields
    an answer shows (:class:`usermemory.sql.base.EntryRow`), not model instances.
    """
    plan = _recall_plan(caller=caller, agent_id=agent_id, group_ids=group_ids, order=order, limit=limit)
    head = plan.limit if plan.order == RecallOrder.MOST_RECENT else recall_split(plan.limit)
    scope = plan.scope(caller=caller, user_id=user_id, min_confidence=min_confidence)
    entries = recall_sql.recall(scope=scope, head=head, rest=plan.limit - head)
    metrics.recalls.labels(kind=plan.order).inc()
    entries.sort(key=_newest_first, reverse=True)
    if plan.order == RecallOrder.MOST_ACCESSED:  # the newest `head` first, then the most accessed of the rest
        entries[head:] = sorted(entries[head:], key=_most_accessed_first, reverse=True)
    return entries


def memory_recall_as_of(
    *,
    caller: Caller,
    user_id: str,
    as_of: datetime,
    agent_id: str | None = None,
    group_ids: list[str] | None = None,
    order: str | None = None,
    limit: int | None = None,
    min_confidence: float | None = None,
) -> list[MemoryEntry]:
    """Recall as of a past time: what the agent could have recalled then, from history
    (:func:`usermemory.selectors.memory_as_of`), newest first, at most the recall limit. It reads history
    only: no access is marked. History keeps no confidence, so ``min_confidence`` is refused; ``order`` is
    ignored (history answers newest first)."""
    if min_confidence is not None:
        raise BadRequest("asOf answers from history, which keeps no confidence: leave minConfidence out.")
    plan = _recall_plan(caller=caller, agent_id=agent_id, group_ids=group_ids, order=None, limit=limit)
    metrics.recalls.labels(kind="as_of").inc()
    return selectors.memory_as_of(
        caller=caller,
        user_id=user_id,
        as_of=as_of,
        agent_id=plan.agent_id,
        require_agent=True,
        limit=plan.limit,
    )


def memory_recall_ranked(
    *,
    caller: Caller,
    user_id: str,
    query: str,
    mode: str = "hybrid",
    agent_id: str | None = None,
    group_ids: list[str] | None = None,
    order: str | None = None,
    limit: int | None = None,
    min_confidence: float | None = None,
    min_score: float | None = None,
    filters: Filters = NO_FILTERS,
) -> RankedSearch:
    """Recall by relevance to ``query``: the context an agent loads for a turn. The same entries a recall
    may return (visible to the agent, in ``group_ids``, narrowed by ``filters``), the same limit (at most the
    policy's ``maxRecallEntries``) and the same access marking (``lastAccessedAt``; ``accessCount`` when the
    order, the policy's unless given, is ``most_accessed``), but ranked as the ``hybrid`` (default) or
    ``semantic`` search ranks them, best first, each with its score: the best ``limit`` (by default the
    policy's ``recallTopK``), and only those scoring at least ``min_score`` when it is given (no cut by
    default: an agent's context would rather hold a few extra facts than miss the one that answers); full
    text alone when the embedder is down (``fallback``).

    Without a reranker one statement ranks, marks and returns the entries
    (:func:`usermemory.sql.search.ranked_recall`), after the user's recall lock, as :func:`memory_recall`
    does. With one, the first stage's candidates are read, reranked, and the chosen ones marked
    (:func:`usermemory.sql.search.mark_recalled`, which keeps only those still visible)."""
    plan = _recall_plan(
        caller=caller, agent_id=agent_id, group_ids=group_ids, order=order, limit=limit, by_relevance=True
    )
    ranking, fallback = ranking_.search_ranking(
        query=query, mode=mode, window=plan.limit, min_score=min_score, user_id=user_id
    )
    scope = plan.scope(caller=caller, user_id=user_id, min_confidence=min_confidence)
    candidates = ranking_.second_stage_window(plan.limit)
    metrics.recalls.labels(kind="relevance").inc()
    if candidates is None:
        entries = search_sql.ranked_recall(scope=scope, ranking=ranking, limit=plan.limit, filters=filters)
        return RankedSearch(entries, fallback)
    first = search_sql.ranked_search(
        user_id=user_id,
        agent_id=scope.agent_id,
        group_ids=scope.group_ids,
        agent_view=True,
        limit=candidates,
        offset=0,
        min_confidence=min_confidence,
        ranking=ranking.without_threshold(),
        filters=filters,
    )
    chosen, failed = ranking_.rerank(
        query=query, candidates=first, min_score=ranking.min_score, agent_id=scope.agent_id
    )
    entries = search_sql.mark_recalled(scope=scope, chosen=chosen[: plan.limit])
    return RankedSearch(entries, ranking_.fallback_of(first=fallback, unreranked=failed))


def _newest_first(entry: EntryRow) -> tuple[datetime, int]:
    return entry.updated_at, entry.id


def _most_accessed_first(entry: EntryRow) -> tuple[int, datetime, int]:
    return entry.access_count, entry.updated_at, entry.id


@transaction.atomic
def properties_delete(*, caller: Caller, user_id: str) -> int:
    """Delete the user's global entries (an agent: only the ones it owns)."""
    return _delete_owned(
        caller=caller, entries=MemoryEntry.objects.filter(user_id=user_id, visibility=Visibility.GLOBAL)
    )
