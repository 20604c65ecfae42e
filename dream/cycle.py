"""One Dream cycle: the lock, the run record, and the passes in order (:mod:`dream.prune`,
:mod:`dream.summarize`, :mod:`dream.contradictions`, then housekeeping of other apps' rows through their
services).

A cycle holds a lock for its whole length (:func:`_cycle_start`): a PostgreSQL session advisory lock
(``LockId.DREAM_CYCLE``), which ends with its holder's connection, so a crashed cycle never blocks the next.
A second cycle that finds the lock taken records itself as ``skipped`` and does nothing.

Call it outside any transaction: each batch of a pass commits on its own (:mod:`dream.batches`).
"""

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from activity.budget import llm_spend_prune
from activity.services import tool_calls_prune
from apikeys.services import agents_mark_idle
from dream import metrics, selectors
from dream.batches import Batching
from dream.contradictions import dream_contradictions_by_meaning, dream_detect_contradictions
from dream.erasure import drop_erased
from dream.models import DreamRun
from dream.prune import dream_prune_stale, dream_prune_turn_counters, prunes, stale_q
from dream.records import error_text
from dream.store import key_vectors_sweep
from dream.summarize import SummaryTotals, dream_summarize
from memoryplatform.embeddings import get_embedder
from memoryplatform.llm import stored_cost
from memoryplatform.locks import LockId, advisory_session_try_lock, advisory_session_unlock
from memoryplatform.logsafe import safe_traceback
from usermemory.models import AgentMemoryPolicy, MemoryEntry, MemoryEvent

logger = logging.getLogger(__name__)

CYCLE_LOCK_KEY = "cycle"

ProgressCallback = Callable[[int, int, str], None]


@dataclass
class _CycleTotals:
    pruned: int = 0
    contradictions: int = 0
    flagged: int = 0
    unflagged: int = 0
    details: dict[str, Any] = field(default_factory=lambda: {"agents": {}})
    summaries: SummaryTotals = field(default_factory=SummaryTotals)


# --- The lock and the run record ---------------------------------------------------------------------


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


def _summary_counts(summaries: SummaryTotals) -> dict[str, Any]:
    return {
        "entries_summarized": summaries.summarized,
        "summaries_written": summaries.written,
        "summarization_failures": summaries.failures,
        "llm_cost": stored_cost(summaries.cost),
    }


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


def _finish(run: DreamRun, totals: _CycleTotals, *, status: str, error: str = "") -> None:
    run.status = status
    run.error = error
    run.finished_at = timezone.now()
    run.entries_pruned = totals.pruned
    run.contradictions_found = totals.contradictions
    run.entries_flagged = totals.flagged
    run.entries_unflagged = totals.unflagged
    summaries = totals.summaries
    if summaries.proposals or summaries.failed or summaries.capped or summaries.out_of_budget:
        totals.details["summaries"] = totals.summaries.details()
    if totals.summaries.calls.made or totals.summaries.calls.stopped:
        totals.details["llmCalls"] = totals.summaries.calls.details()
    for name, value in _summary_counts(totals.summaries).items():
        setattr(run, name, value)
    with transaction.atomic():
        # The row lock a GDPR erasure takes too: a user erased while the cycle ran leaves no record here.
        list(DreamRun.objects.select_for_update().filter(pk=run.pk).values_list("pk", flat=True))
        run.details = drop_erased(details=totals.details, since=run.started_at)
        updated = _write_finish(run, status=status, error=error, totals=totals)
    if not updated:
        logger.warning("Dream run #%s was marked abandoned before it finished as %s", run.pk, status)


def _write_finish(run: DreamRun, *, status: str, error: str, totals: _CycleTotals) -> int:
    return DreamRun.objects.filter(pk=run.pk, status=DreamRun.Status.RUNNING).update(
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


# --- The passes, in order ----------------------------------------------------------------------------


@dataclass
class _Cycle:
    """What every pass of one cycle shares: its run, counts, batching, scope and progress callback."""

    run: DreamRun
    totals: _CycleTotals
    batching: Batching
    agent_id: str | None
    dry_run: bool
    on_progress: ProgressCallback | None

    @property
    def actor_id(self) -> str:
        return f"run:{self.run.pk}"

    @property
    def now(self) -> datetime:
        return self.run.started_at

    def progress(self, done: int, total: int, label: str) -> None:
        if self.on_progress:
            self.on_progress(done, total, label)

    def after_batch(self, action: str, rows: int) -> None:
        """Count a committed batch (the counts of committed batches survive a failure)."""
        if action == MemoryEvent.Action.PRUNED:
            self.totals.pruned += rows
            metrics.entries_pruned.inc(rows)
        elif action == MemoryEvent.Action.FLAGGED:
            self.totals.flagged += rows
        else:
            self.totals.unflagged += rows
        _heartbeat(self.run, self.totals)


def _users_in_scope(policies: list[AgentMemoryPolicy]) -> int:
    if any(p.cross_agent_maintenance for p in policies):
        qs = MemoryEntry.objects.all()
    else:
        qs = MemoryEntry.objects.filter(source_agent_id__in=[p.agent_id for p in policies])
    return qs.values("user_id").distinct().count()


def _prune_pass(cycle: _Cycle, policies: list[AgentMemoryPolicy], total_steps: int) -> Q | None:
    """Stale pruning, per agent in agent order. Returns, for a dry run, the entries it counted (so that each
    is counted once, as the real cycle deletes it once); ``None`` for a real one."""
    totals = cycle.totals
    counted: Q | None = None
    for done, policy in enumerate(policies, start=1):
        result = dream_prune_stale(
            policy=policy,
            now=cycle.now,
            dry_run=cycle.dry_run,
            batching=cycle.batching,
            actor_id=cycle.actor_id,
            exclude=counted if cycle.dry_run else None,
        )
        if cycle.dry_run and prunes(policy):
            stale = stale_q(policy=policy, now=cycle.now)
            counted = stale if counted is None else counted | stale
        if cycle.dry_run:
            totals.pruned += result.pruned
        totals.details["agents"][policy.agent_id] = {
            "pruned": result.pruned,
            "pruneStaleAfterDays": policy.prune_stale_after_days,
            "pruneExpiredAfterDays": policy.prune_expired_after_days,
            "crossAgentMaintenance": policy.cross_agent_maintenance,
            "detectContradictions": policy.detect_contradictions,
            "summarizeInteractions": policy.summarize_interactions,
        }
        _heartbeat(cycle.run, totals)
        cycle.progress(done, total_steps, f"pruned {policy.agent_id}")
    return counted


def _contradiction_pass(cycle: _Cycle, detectors: list[AgentMemoryPolicy], counted: Q | None) -> None:
    """Contradictions by meaning, then by (user, key) set, over the detectors' entries (every entry when one
    of them has cross-agent maintenance)."""
    totals = cycle.totals
    cross = any(p.cross_agent_maintenance for p in detectors)
    dream_contradictions_by_meaning(
        detectors=detectors,
        cross=cross,
        summaries=totals.summaries,
        details=totals.details,
        dry_run=cycle.dry_run,
        exclude=counted,
    )
    found = dream_detect_contradictions(
        agent_ids=None if cross else [p.agent_id for p in detectors],
        now=cycle.now,
        dry_run=cycle.dry_run,
        batching=cycle.batching,
        actor_id=cycle.actor_id,
        exclude=counted,
    )
    totals.contradictions = found.contradictions
    totals.flagged = found.flagged
    totals.unflagged = found.unflagged
    if not cycle.dry_run:
        metrics.contradictions_found.inc(found.contradictions)


def _housekeeping(cycle: _Cycle) -> None:
    """Old turn counters, tool calls past their agent's retention (every agent, or only ``agent_id``), the LLM
    spending past its window (:mod:`activity.budget`),
    (a cycle for every agent) active agents unused for ``AGENT_IDLE_AFTER``, and the key vectors of keys no
    entry holds any more or of another model than the embedder's (:mod:`dream.store`)."""
    details = cycle.totals.details
    details["turnCountersDeleted"] = dream_prune_turn_counters(now=cycle.now, batching=cycle.batching)
    embedder = get_embedder()
    details["keyVectorsDeleted"] = key_vectors_sweep(model=embedder.model_id if embedder else "")
    details["toolCallsDeleted"] = tool_calls_prune(
        now=cycle.now, batch_size=cycle.batching.size, agent_id=cycle.agent_id
    )
    details["llmSpendDeleted"] = llm_spend_prune(now=cycle.now)
    if cycle.agent_id is None:
        details["agentsMarkedIdle"] = agents_mark_idle(now=cycle.now)


def _run_passes(cycle: _Cycle) -> None:
    run, totals = cycle.run, cycle.totals
    policies = list(selectors.dream_policies(agent_id=cycle.agent_id))
    detectors = [p for p in policies if p.detect_contradictions]
    total_steps = len(policies) + 1
    run.agents_processed = len(policies)
    run.users_processed = _users_in_scope(policies) if policies else 0
    _heartbeat(run, totals)
    if not cycle.dry_run:
        metrics.users_processed.inc(run.users_processed)
    cycle.progress(0, total_steps, "starting")

    counted = _prune_pass(cycle, policies, total_steps)
    summarizers = [p for p in policies if p.summarize_interactions]
    if summarizers:
        dream_summarize(
            run=run,
            policies=summarizers,
            totals=totals.summaries,
            details=totals.details,
            dry_run=cycle.dry_run,
        )
        _heartbeat(run, totals)
    if detectors:
        _contradiction_pass(cycle, detectors, counted)
    if not cycle.dry_run:
        _housekeeping(cycle)
    cycle.progress(total_steps, total_steps, "contradictions")


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
    cycle = _Cycle(run, totals, batching, agent_id, dry_run, on_progress)
    batching.after_batch = cycle.after_batch
    try:
        _run_passes(cycle)
    except BaseException as exc:  # soft time limits and Ctrl-C too: the run must not stay "running"
        logger.error("Dream run #%s failed\n%s", run.pk, safe_traceback(exc))
        try:
            _finish(run, totals, status=DreamRun.Status.FAILED, error=error_text(exc))
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
