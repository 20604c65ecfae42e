"""Dream's contradiction passes: a (user, key) set that holds more than one value, and keys that mean the
same (:mod:`dream.meaning`) with values that disagree. Entries are flagged through
:func:`usermemory.maintenance.memory_flag_batch`, in bounded batches."""

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Q, QuerySet
from django.utils import timezone

from dream import metrics
from dream.batches import Batching, in_batches
from dream.meaning import ConfirmLimits, dream_meaning_conflicts
from dream.models import DreamPolicy
from dream.selectors import dream_current_entries, dream_set_disagrees
from dream.summarize import SummaryTotals
from memoryplatform.llm import LLMError, build_llm
from usermemory.conflicts import conflict_sets_of
from usermemory.maintenance import memory_flag_batch
from usermemory.models import AgentMemoryPolicy, MemoryEntry, MemoryEvent


@dataclass
class ContradictionResult:
    contradictions: int  # conflict sets (a key's, with its partners by meaning) with a newly flagged entry
    flagged: int
    unflagged: int
    dry_run: bool


def scope_q(agent_ids: list[str] | None) -> Q:
    """``None``: every entry (cross-agent maintenance); else the entries these agents own."""
    return Q() if agent_ids is None else Q(source_agent_id__in=agent_ids)


def _count_sets(ids: set[int]) -> int:
    """The conflict sets that hold one of the entries ``ids``: a (user, key) set, joined with its partners by
    meaning (:func:`usermemory.conflicts.conflict_sets_of`), so ``city`` against ``home_town`` is one."""
    fields = ("id", "user_id", "key", "meaning_conflicts")
    rows = list(MemoryEntry.objects.filter(id__in=ids).only(*fields))
    partners = {p for row in rows for p in row.meaning_conflicts} - ids
    rows += list(MemoryEntry.objects.filter(id__in=partners).only(*fields))
    return sum(1 for group in conflict_sets_of(rows) if any(row.id in ids for row in group))


def _sets_flagged(*, at: datetime, actor_id: str) -> int:
    """The conflict sets a pass flagged, counted from its events: one set's entries may span batches."""
    events = MemoryEvent.objects.filter(
        created_at=at,
        action=MemoryEvent.Action.FLAGGED,
        actor_type=MemoryEvent.ActorType.DREAM,
        actor_id=actor_id,
    )
    return _count_sets(set(events.values_list("entry_id", flat=True)))


def dream_detect_contradictions(
    *,
    agent_ids: list[str] | None,
    now: datetime | None = None,
    dry_run: bool = False,
    batching: Batching | None = None,
    actor_id: str | None = None,
    exclude: Q | None = None,
) -> ContradictionResult:
    """Flag ``conflicted`` on every in-scope entry whose (user, key) set, across all agents and
    visibilities, holds more than one distinct value; clear it where the set agrees again. Each change
    leaves a ``flagged`` or ``unflagged`` event.

    The scope is the entries ``agent_ids`` own, or every entry for ``None``. ``dry_run`` counts instead,
    as if the ``exclude``d entries (those an earlier dry pass would prune) were gone.
    """
    at = now or timezone.now()
    actor = actor_id or f"dream:{uuid.uuid4().hex[:12]}"
    scope = dream_current_entries(exclude=exclude).filter(scope_q(agent_ids))
    # A set of one key that disagrees, or a partner by meaning (dream.meaning) that does.
    by_meaning = ~Q(meaning_conflicts=[])
    to_flag = scope.filter(conflicted=False).filter(Q(dream_set_disagrees(exclude=exclude)) | by_meaning)
    to_clear = scope.filter(conflicted=True).exclude(dream_set_disagrees(exclude=exclude)).exclude(by_meaning)
    if dry_run:
        return ContradictionResult(
            contradictions=_count_sets(set(to_flag.values_list("id", flat=True))),
            flagged=to_flag.count(),
            unflagged=to_clear.count(),
            dry_run=True,
        )
    batching = batching or Batching.from_settings()

    def mark(select: QuerySet[MemoryEntry], conflicted: bool) -> int:
        return in_batches(
            select=select,
            apply=lambda ids: memory_flag_batch(ids=ids, conflicted=conflicted, actor_id=actor, at=at),
            batching=batching,
            action=MemoryEvent.Action.FLAGGED if conflicted else MemoryEvent.Action.UNFLAGGED,
        )

    flagged = mark(to_flag, True)
    unflagged = mark(to_clear, False)
    contradictions = _sets_flagged(at=at, actor_id=actor) if flagged else 0
    return ContradictionResult(
        contradictions=contradictions, flagged=flagged, unflagged=unflagged, dry_run=False
    )


def _strictest_threshold(detectors: list[DreamPolicy]) -> float:
    """The highest of the detectors' ``semanticContradictionThreshold`` (usermemory's part of their policy,
    which extraction's key matching reads too; an agent without one has the default)."""
    default = AgentMemoryPolicy._meta.get_field("semantic_contradiction_threshold").get_default()
    stored = dict(
        AgentMemoryPolicy.objects.filter(agent_id__in=[p.agent_id for p in detectors]).values_list(
            "agent_id", "semantic_contradiction_threshold"
        )
    )
    return max(stored.get(p.agent_id, default) for p in detectors)


def dream_contradictions_by_meaning(
    *,
    detectors: list[DreamPolicy],
    cross: bool,
    summaries: SummaryTotals,
    details: dict[str, Any],
    dry_run: bool,
    exclude: Q | None,
) -> set[int]:
    """Contradictions by meaning (:mod:`dream.meaning`) over the detectors' scope, at the strictest of their
    thresholds; the LLM confirms the pairs when one of them asks, within what the lowest of their
    ``maxCostPerRun`` leaves (the summaries, after this pass, count what it spent), and within the lowest of
    their call caps (counted with the cycle's summary calls); each call is paid by a confirming agent's LLM
    budget (:func:`dream.meaning.confirm`). Its cost goes to ``summaries.cost``, its report to
    ``details["meaning"]``. Returns the entries of the pairs found (a dry run flags none; its summaries leave
    them out, as the real cycle's leave the flagged ones)."""
    confirming = [p for p in detectors if p.confirm_contradictions_with_llm]
    llm = None
    limits = None
    if confirming:
        try:
            llm = build_llm()
        except LLMError as exc:
            details["meaningLlm"] = f"LLM settings: {exc}"
        limits = ConfirmLimits(
            budget=min(float(p.max_cost_per_run) for p in confirming) - summaries.cost,
            calls=summaries.calls,
            per_run=min(p.max_llm_calls_per_run for p in confirming),
            per_user=min(p.max_llm_calls_per_user for p in confirming),
            payers=tuple(sorted(p.agent_id for p in confirming)),
        )
    result = dream_meaning_conflicts(
        current=dream_current_entries(exclude=exclude),
        scope=scope_q(None if cross else [p.agent_id for p in detectors]),
        threshold=_strictest_threshold(detectors),
        llm=llm,
        limits=limits,
        dry_run=dry_run,
    )
    summaries.cost += result.cost
    metrics.llm_cost_dollars.inc(result.cost)
    details["meaning"] = result.details()
    return {entry_id for pair in result.pairs for entry_id in pair}
