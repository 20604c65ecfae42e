"""Dream consolidation (seed 002): stale pruning and contradiction detection, run as one locked cycle.

Every pass is set-based SQL committed in bounded batches. A batch picks the next ``batch_size`` matching ids
(keyset on id, rows locked with ``FOR UPDATE SKIP LOCKED``), writes one history event per row
with a single ``INSERT ... SELECT``, and applies the change with one statement, all in its own transaction.
A failure rolls back the batch it happened in and leaves earlier batches committed: nothing is ever half
applied.

A cycle holds a lock for its whole length (:func:`_cycle_start`): a PostgreSQL session advisory lock
(``LockId.DREAM_CYCLE``), which ends with its holder's connection, so a crashed cycle never blocks the next.
A second cycle that finds the lock taken records itself as ``skipped`` and does nothing.

Call these outside any transaction: each batch commits on its own.
"""

import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.db.models.functions import Coalesce
from django.utils import timezone

from activity.services import tool_calls_prune
from apikeys.services import agents_mark_idle
from dream import metrics, selectors, store, summarize
from dream.meaning import dream_meaning_conflicts
from dream.models import DreamRun
from dream.summarize import SummaryTotals, summarize_policy
from memoryplatform.llm import LLMError, build_llm
from memoryplatform.locks import LockId, advisory_session_try_lock, advisory_session_unlock
from usermemory.models import AgentMemoryPolicy, MemoryEntry, MemoryEvent, TurnWriteCount
from usermemory.selectors import current_q

logger = logging.getLogger(__name__)

DEFAULT_BATCH_SIZE = 2000
MAX_BATCH_SIZE = 10_000  # a batch's ids travel as one array parameter; bounded to keep transactions short
CYCLE_LOCK_KEY = "cycle"

ProgressCallback = Callable[[int, int, str], None]


@dataclass
class Batching:
    """How a pass commits: ``size`` rows per transaction, ``pause`` seconds between transactions (to leave
    room for other writers), and ``after_batch(action, rows)`` called after each commit."""

    size: int = DEFAULT_BATCH_SIZE
    pause: float = 0.0
    after_batch: Callable[[str, int], None] | None = None

    @classmethod
    def from_settings(cls, *, size: int | None = None, pause: float | None = None) -> "Batching":
        size = size if size is not None else settings.DREAM_BATCH_SIZE
        pause = pause if pause is not None else settings.DREAM_BATCH_PAUSE
        if not 1 <= size <= MAX_BATCH_SIZE:
            raise ValueError(f"batch size must be between 1 and {MAX_BATCH_SIZE}, got {size}")
        return cls(size=size, pause=max(0.0, float(pause)))


@dataclass
class PruneResult:
    agent_id: str
    pruned: int
    dry_run: bool


@dataclass
class ContradictionResult:
    contradictions: int  # (user, key) sets with a newly flagged entry
    flagged: int
    unflagged: int
    dry_run: bool


@dataclass
class _CycleTotals:
    pruned: int = 0
    contradictions: int = 0
    flagged: int = 0
    unflagged: int = 0
    details: dict[str, Any] = field(default_factory=lambda: {"agents": {}})
    summaries: SummaryTotals = field(default_factory=SummaryTotals)


# --- Set-based batch machinery -----------------------------------------------------------------------


def _with_seen_at(qs: QuerySet[MemoryEntry]) -> QuerySet[MemoryEntry]:
    """Alias ``seen_at``: the last access, or the last update when never accessed."""
    return qs.alias(seen_at=Coalesce("last_accessed_at", "updated_at"))


def _entries(exclude: Q | None = None) -> QuerySet[MemoryEntry]:
    qs = _with_seen_at(MemoryEntry.objects.all())
    return qs.exclude(exclude) if exclude is not None else qs


def _current(exclude: Q | None = None) -> QuerySet[MemoryEntry]:
    """The entries valid now (superseded and expired ones take part in no contradiction)."""
    return _entries(exclude).filter(current_q())


def _in_batches(
    *, select: QuerySet[MemoryEntry], apply: Callable[[list[int]], None], batching: Batching, action: str
) -> int:
    """Run ``apply`` on the ids ``select`` matches, ``batching.size`` at a time, each batch in its own
    transaction. Keyset on id, so every batch makes progress and the whole pass reads each row once."""
    last_id = 0
    total = 0
    while True:
        with transaction.atomic():
            ids = list(
                select.filter(id__gt=last_id)
                .select_for_update(skip_locked=True, of=("self",))
                .order_by("id")
                .values_list("id", flat=True)[: batching.size]
            )
            if ids:
                apply(ids)
        if not ids:
            return total
        total += len(ids)
        last_id = ids[-1]
        if batching.after_batch is not None:
            batching.after_batch(action, len(ids))
        if batching.pause:
            time.sleep(batching.pause)


# --- Stale pruning -----------------------------------------------------------------------------------


def _stale_q(*, policy: AgentMemoryPolicy, now: datetime) -> Q:
    """Entries this policy prunes: not seen for ``prune_stale_after_days``; its own unless cross-agent."""
    condition = Q(seen_at__lt=now - timedelta(days=policy.prune_stale_after_days))
    if not policy.cross_agent_maintenance:
        condition &= Q(source_agent_id=policy.agent_id)
    return condition


def dream_prune_stale(
    *,
    policy: AgentMemoryPolicy,
    now: datetime | None = None,
    dry_run: bool = False,
    batching: Batching | None = None,
    actor_id: str = "dream",
    exclude: Q | None = None,
) -> PruneResult:
    """Delete the entries ``policy`` finds stale, with a ``pruned`` event each. 0 days disables pruning.

    ``dry_run`` counts instead (minus ``exclude``: entries an earlier dry pass of the cycle already
    counted). Returns how many entries were (or would be) pruned.
    """
    if policy.prune_stale_after_days == 0:
        return PruneResult(agent_id=policy.agent_id, pruned=0, dry_run=dry_run)
    now = now or timezone.now()
    stale = _entries(exclude).filter(_stale_q(policy=policy, now=now))
    if dry_run:
        return PruneResult(agent_id=policy.agent_id, pruned=stale.count(), dry_run=True)

    def apply(ids: list[int]) -> None:
        store.write_events(
            ids=ids,
            action=MemoryEvent.Action.PRUNED,
            value_column="old_value",
            actor_type=MemoryEvent.ActorType.DREAM,
            actor_id=actor_id,
            at=now,
        )
        store.delete_entries(ids=ids)

    pruned = _in_batches(
        select=stale,
        apply=apply,
        batching=batching or Batching.from_settings(),
        action=MemoryEvent.Action.PRUNED,
    )
    return PruneResult(agent_id=policy.agent_id, pruned=pruned, dry_run=False)


# --- Contradiction detection -------------------------------------------------------------------------


def _scope_q(agent_ids: list[str] | None) -> Q:
    """``None``: every entry (cross-agent maintenance); else the entries these agents own."""
    return Q() if agent_ids is None else Q(source_agent_id__in=agent_ids)


def _set_disagrees(exclude: Q | None) -> Exists:
    """The entry's (user, key) set holds another value: compared by the value's text/JSON form."""
    return Exists(
        _current(exclude)
        .filter(user_id=OuterRef("user_id"), key=OuterRef("key"))
        .exclude(value_text=OuterRef("value_text"))
    )


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
    now = now or timezone.now()
    actor_id = actor_id or f"dream:{uuid.uuid4().hex[:12]}"
    scope = _current(exclude).filter(_scope_q(agent_ids))
    # A set of one key that disagrees, or a partner by meaning (dream.meaning) that does.
    by_meaning = ~Q(meaning_conflicts=[])
    to_flag = scope.filter(conflicted=False).filter(Q(_set_disagrees(exclude)) | by_meaning)
    to_clear = scope.filter(conflicted=True).exclude(_set_disagrees(exclude)).exclude(by_meaning)
    if dry_run:
        return ContradictionResult(
            contradictions=to_flag.values("user_id", "key").distinct().count(),
            flagged=to_flag.count(),
            unflagged=to_clear.count(),
            dry_run=True,
        )
    batching = batching or Batching.from_settings()

    def mark(select: QuerySet[MemoryEntry], conflicted: bool) -> int:
        action = MemoryEvent.Action.FLAGGED if conflicted else MemoryEvent.Action.UNFLAGGED

        def apply(ids: list[int]) -> None:
            store.write_events(
                ids=ids,
                action=action,
                value_column="new_value",
                actor_type=MemoryEvent.ActorType.DREAM,
                actor_id=actor_id,
                at=now,
            )
            MemoryEntry.objects.filter(id__in=ids).update(conflicted=conflicted)

        return _in_batches(select=select, apply=apply, batching=batching, action=action)

    flagged = mark(to_flag, True)
    unflagged = mark(to_clear, False)
    # Sets, not entries: one set's entries may span batches, so count them from this pass's events.
    contradictions = (
        MemoryEvent.objects.filter(
            created_at=now,
            action=MemoryEvent.Action.FLAGGED,
            actor_type=MemoryEvent.ActorType.DREAM,
            actor_id=actor_id,
        )
        .values("user_id", "key")
        .distinct()
        .count()
        if flagged
        else 0
    )
    return ContradictionResult(
        contradictions=contradictions, flagged=flagged, unflagged=unflagged, dry_run=False
    )


# --- The cycle: lock, run record, metrics ------------------------------------------------------------


TURN_COUNTER_RETENTION = timedelta(days=1)


def dream_prune_turn_counters(*, now: datetime | None = None, batching: Batching | None = None) -> int:
    """Delete per-turn write counters whose turn began over a day ago (a turn is over long before), in
    bounded batches. Returns how many were deleted."""
    cutoff = (now or timezone.now()) - TURN_COUNTER_RETENTION
    batching = batching or Batching.from_settings()
    total = 0
    while True:
        with transaction.atomic():
            ids = list(
                TurnWriteCount.objects.filter(window_start__lt=cutoff)
                .order_by("id")
                .values_list("id", flat=True)[: batching.size]
            )
            if ids:
                TurnWriteCount.objects.filter(id__in=ids).delete()
        if not ids:
            return total
        total += len(ids)


def _record_skipped(*, trigger: str, agent_id: str | None, now: datetime) -> DreamRun:
    holder = DreamRun.objects.filter(status=DreamRun.Status.RUNNING, dry_run=False).first()
    reason = "Another Dream cycle is running" + (f" (run #{holder.pk})." if holder else ".")
    return DreamRun.objects.create(
        trigger=trigger,
        only_agent=agent_id or "",
        status=DreamRun.Status.SKIPPED,
        started_at=now,
        finished_at=now,
        heartbeat_at=now,
        error=reason,
    )


def _fail_abandoned_runs(now: datetime) -> None:
    """Mark ``failed`` the running runs whose process is gone: a live run holds its own session lock
    (``LockId.DREAM_RUN``, keyed by its id) for its whole length, and a dead process's locks went with its
    connection. Few rows: only runs recorded as running."""
    for run_id in DreamRun.objects.filter(status=DreamRun.Status.RUNNING).values_list("id", flat=True):
        if not advisory_session_try_lock(LockId.DREAM_RUN, str(run_id)):
            continue  # its process is alive
        advisory_session_unlock(LockId.DREAM_RUN, str(run_id))
        DreamRun.objects.filter(pk=run_id, status=DreamRun.Status.RUNNING).update(
            status=DreamRun.Status.FAILED, finished_at=now, error="Abandoned: its process stopped mid-cycle."
        )


def _cycle_start(*, trigger: str, agent_id: str | None, dry_run: bool) -> DreamRun:
    """Take the cycle lock and record the run as ``running`` (holding the run's own lock); or record it
    ``skipped``. The cycle lock (``LockId.DREAM_CYCLE``) is a session advisory lock, so one real cycle runs at
    a time, and it can never go stale: it ends with its holder's connection. A dry run takes no cycle lock: it
    writes nothing but its own record."""
    now = timezone.now()
    if not dry_run and not advisory_session_try_lock(LockId.DREAM_CYCLE, CYCLE_LOCK_KEY):
        return _record_skipped(trigger=trigger, agent_id=agent_id, now=now)
    try:
        _fail_abandoned_runs(now)
        run = DreamRun.objects.create(
            trigger=trigger,
            dry_run=dry_run,
            only_agent=agent_id or "",
            status=DreamRun.Status.RUNNING,
            started_at=now,
            heartbeat_at=now,
        )
        advisory_session_try_lock(LockId.DREAM_RUN, str(run.pk))  # a new id: nobody else holds it
    except BaseException:
        _release(run_id=None, dry_run=dry_run)
        raise
    return run


def _heartbeat(run: DreamRun, totals: _CycleTotals) -> None:
    """Record progress: the time of the last committed batch and the counts so far."""
    DreamRun.objects.filter(pk=run.pk, status=DreamRun.Status.RUNNING).update(
        heartbeat_at=timezone.now(),
        agents_processed=run.agents_processed,
        users_processed=run.users_processed,
        entries_pruned=totals.pruned,
        contradictions_found=totals.contradictions,
        entries_flagged=totals.flagged,
        entries_unflagged=totals.unflagged,
        **_summary_counts(totals.summaries),
    )


def _summary_counts(summaries: SummaryTotals) -> dict[str, Any]:
    return {
        "entries_summarized": summaries.summarized,
        "summaries_written": summaries.written,
        "summarization_failures": summaries.failures,
        "llm_cost": Decimal(str(round(summaries.cost, 6))),
    }


def _finish(run: DreamRun, totals: _CycleTotals, *, status: str, error: str = "") -> None:
    run.status = status
    run.error = error
    run.finished_at = timezone.now()
    run.entries_pruned = totals.pruned
    run.contradictions_found = totals.contradictions
    run.entries_flagged = totals.flagged
    run.entries_unflagged = totals.unflagged
    if totals.summaries.proposals or totals.summaries.failed or totals.summaries.capped:
        totals.details["summaries"] = totals.summaries.details()
    run.details = totals.details
    for name, value in _summary_counts(totals.summaries).items():
        setattr(run, name, value)
    updated = DreamRun.objects.filter(pk=run.pk, status=DreamRun.Status.RUNNING).update(
        status=status,
        error=error,
        finished_at=run.finished_at,
        agents_processed=run.agents_processed,
        users_processed=run.users_processed,
        entries_pruned=run.entries_pruned,
        contradictions_found=run.contradictions_found,
        entries_flagged=run.entries_flagged,
        entries_unflagged=run.entries_unflagged,
        details=run.details,
        approval=run.approval,
        **_summary_counts(totals.summaries),
    )
    if not updated:
        logger.warning("Dream run #%s was marked abandoned before it finished as %s", run.pk, status)


def _users_in_scope(policies: list[AgentMemoryPolicy]) -> int:
    if any(p.cross_agent_maintenance for p in policies):
        qs = MemoryEntry.objects.all()
    else:
        qs = MemoryEntry.objects.filter(source_agent_id__in=[p.agent_id for p in policies])
    return qs.values("user_id").distinct().count()


def dream_run_cycle(
    *,
    agent_id: str | None = None,
    dry_run: bool = False,
    trigger: str = DreamRun.Trigger.MANUAL,
    batch_size: int | None = None,
    batch_pause: float | None = None,
    on_progress: ProgressCallback | None = None,
) -> DreamRun:
    """Run one Dream cycle for every agent whose Dream is enabled (or only ``agent_id``), and return its
    :class:`DreamRun`: ``succeeded``, ``skipped`` (another cycle held the lock) or, after an error that is
    re-raised, ``failed``.

    Per agent, in agent order, stale pruning; then one contradiction pass over the entries of the agents
    that detect contradictions (every entry when one of them has cross-agent maintenance). Then, for every
    agent (or only ``agent_id``), Dream enabled or not, the tool calls past the agent's retention are deleted,
    and (a cycle for every agent) active agents unused for ``AGENT_IDLE_AFTER`` are marked idle.
    ``dry_run`` changes no entry and reports what the cycle would do. ``on_progress(done, total, label)``
    follows the steps.
    """
    batching = Batching.from_settings(size=batch_size, pause=batch_pause)
    run = _cycle_start(trigger=trigger, agent_id=agent_id, dry_run=dry_run)
    if run.status == DreamRun.Status.SKIPPED:
        logger.info("Dream cycle skipped: %s", run.error)
        return run

    started = time.monotonic()
    totals = _CycleTotals()

    def after_batch(action: str, rows: int) -> None:  # counts of committed batches survive a failure
        if action == MemoryEvent.Action.PRUNED:
            totals.pruned += rows
            metrics.entries_pruned.inc(rows)
        elif action == MemoryEvent.Action.FLAGGED:
            totals.flagged += rows
        else:
            totals.unflagged += rows
        _heartbeat(run, totals)

    batching.after_batch = after_batch
    actor_id = f"run:{run.pk}"
    now = run.started_at
    try:
        policies = list(selectors.dream_policies(agent_id=agent_id))
        detectors = [p for p in policies if p.detect_contradictions]
        total_steps = len(policies) + 1
        run.agents_processed = len(policies)
        run.users_processed = _users_in_scope(policies) if policies else 0
        _heartbeat(run, totals)
        if not dry_run:
            metrics.users_processed.inc(run.users_processed)
        if on_progress:
            on_progress(0, total_steps, "starting")

        counted: Q | None = None  # a dry run counts each entry once, as the real cycle deletes it once
        for done, policy in enumerate(policies, start=1):
            result = dream_prune_stale(
                policy=policy,
                now=now,
                dry_run=dry_run,
                batching=batching,
                actor_id=actor_id,
                exclude=counted if dry_run else None,
            )
            if dry_run and policy.prune_stale_after_days:
                stale = _stale_q(policy=policy, now=now)
                counted = stale if counted is None else counted | stale
            if dry_run:
                totals.pruned += result.pruned
            totals.details["agents"][policy.agent_id] = {
                "pruned": result.pruned,
                "pruneStaleAfterDays": policy.prune_stale_after_days,
                "crossAgentMaintenance": policy.cross_agent_maintenance,
                "detectContradictions": policy.detect_contradictions,
                "summarizeInteractions": policy.summarize_interactions,
            }
            _heartbeat(run, totals)
            if on_progress:
                on_progress(done, total_steps, f"pruned {policy.agent_id}")

        summarizers = [p for p in policies if p.summarize_interactions]
        if summarizers:
            _summarize(run=run, policies=summarizers, totals=totals, dry_run=dry_run)
            _heartbeat(run, totals)

        if detectors:
            cross = any(p.cross_agent_maintenance for p in detectors)
            _meaning(detectors=detectors, cross=cross, totals=totals, dry_run=dry_run, exclude=counted)
            found = dream_detect_contradictions(
                agent_ids=None if cross else [p.agent_id for p in detectors],
                now=now,
                dry_run=dry_run,
                batching=batching,
                actor_id=actor_id,
                exclude=counted,
            )
            totals.contradictions = found.contradictions
            totals.flagged = found.flagged
            totals.unflagged = found.unflagged
            if not dry_run:
                metrics.contradictions_found.inc(found.contradictions)
        if not dry_run:
            totals.details["turnCountersDeleted"] = dream_prune_turn_counters(now=now, batching=batching)
            totals.details["toolCallsDeleted"] = tool_calls_prune(
                now=now, batch_size=batching.size, agent_id=agent_id
            )
            if agent_id is None:
                totals.details["agentsMarkedIdle"] = agents_mark_idle(now=now)
        if on_progress:
            on_progress(total_steps, total_steps, "contradictions")
    except BaseException as exc:  # soft time limits and Ctrl-C too: the run must not stay "running"
        logger.exception("Dream run #%s failed", run.pk)
        try:
            _finish(run, totals, status=DreamRun.Status.FAILED, error=f"{type(exc).__name__}: {exc}")
        finally:
            if not dry_run:
                metrics.cycles_failed.inc()
                metrics.duration_seconds.observe(time.monotonic() - started)
            _release(run_id=run.pk, dry_run=dry_run)
        raise
    _finish(run, totals, status=DreamRun.Status.SUCCEEDED)
    if not dry_run:
        metrics.duration_seconds.observe(time.monotonic() - started)
    _release(run_id=run.pk, dry_run=dry_run)
    return run


def _meaning(
    *, detectors: list[AgentMemoryPolicy], cross: bool, totals: _CycleTotals, dry_run: bool, exclude: Q | None
) -> None:
    """Contradictions by meaning (:mod:`dream.meaning`) over the detectors' scope, at the strictest of their
    thresholds; the LLM confirms the pairs when one of them asks, within what the lowest of their
    ``maxCostPerRun`` leaves after the cycle's summaries."""
    confirming = [p for p in detectors if p.confirm_contradictions_with_llm]
    llm = None
    budget = 0.0
    if confirming:
        try:
            llm = build_llm()
        except LLMError as exc:
            totals.details["meaningLlm"] = f"LLM settings: {exc}"
        budget = min(float(p.max_cost_per_run) for p in confirming) - totals.summaries.cost
    result = dream_meaning_conflicts(
        current=_current(exclude),
        scope=_scope_q(None if cross else [p.agent_id for p in detectors]),
        threshold=max(p.semantic_contradiction_threshold for p in detectors),
        llm=llm,
        budget=budget,
        dry_run=dry_run,
    )
    totals.summaries.cost += result.cost
    metrics.llm_cost_dollars.inc(result.cost)
    totals.details["meaning"] = result.details()


def _summarize(
    *, run: DreamRun, policies: list[AgentMemoryPolicy], totals: _CycleTotals, dry_run: bool
) -> None:
    """The summaries of the policies that ask for them (:mod:`dream.summarize`), with the LLM the settings
    describe. Without one, or with wrong settings, the run says so and the cycle goes on."""
    summaries = totals.summaries
    try:
        llm = build_llm()
    except LLMError as exc:
        summaries.failures += 1
        summaries.failed.append({"error": f"LLM settings: {exc}"})
        metrics.summarization_failed.inc()
        return
    if llm is None:
        totals.details["summariesSkipped"] = "summarizeInteractions is on, but LLM_PROVIDER is empty."
        return
    for policy in policies:
        if dry_run:
            mode = summarize.DRY_RUN
        elif policy.summarize_requires_approval:
            mode = summarize.APPROVAL
        else:
            mode = summarize.WRITE
        summarize_policy(policy=policy, llm=llm, run_id=run.pk, totals=summaries, mode=mode)
    if any(p.get("pending") for p in summaries.proposals):
        run.approval = DreamRun.Approval.PENDING


def _release(*, run_id: int | None, dry_run: bool) -> None:
    """Release the run's lock and, for a real cycle, the cycle lock."""
    try:
        if run_id is not None:
            advisory_session_unlock(LockId.DREAM_RUN, str(run_id))
        if not dry_run:
            advisory_session_unlock(LockId.DREAM_CYCLE, CYCLE_LOCK_KEY)
    except Exception:  # a broken connection already dropped the locks with the session
        logger.warning("Could not release the Dream advisory locks; closing the connection instead.")
        connection.close()
