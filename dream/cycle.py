"""One Dream cycle: the lock, the run record, and the passes of :data:`dream.passes.PASSES` in order (pruning,
contradictions, summaries, which never take an entry in conflict, then housekeeping of other apps' rows
through their services).

A cycle holds a lock for its whole length (:func:`_cycle_start`): a PostgreSQL session advisory lock
(``LockId.DREAM_CYCLE``), which ends with its holder's connection, so a crashed cycle never blocks the next.
A second cycle that finds the lock taken records itself as ``skipped`` and does nothing.

Call it outside any transaction: each batch of a pass commits on its own (:mod:`dream.batches`).
"""

import logging
import time
from datetime import datetime

from django.db import connection, transaction
from django.utils import timezone

from dream import metrics, passes, selectors
from dream.batches import Batching
from dream.erasure import drop_erased
from dream.models import DreamPolicy, DreamRun
from dream.passes import Cycle, CycleTotals, ProgressCallback, heartbeat, summary_counts
from dream.records import error_text
from events.models import EventType
from events.services import event_record
from memoryplatform.locks import LockId, advisory_session_try_lock, advisory_session_unlock
from memoryplatform.logsafe import safe_traceback
from usermemory.models import MemoryEntry, Visibility

__all__ = ["CYCLE_LOCK_KEY", "ProgressCallback", "dream_run_cycle"]

logger = logging.getLogger(__name__)

CYCLE_LOCK_KEY = "cycle"


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


def _finish(run: DreamRun, totals: CycleTotals, *, status: str, error: str = "") -> None:
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
    for name, value in summary_counts(totals.summaries).items():
        setattr(run, name, value)
    with transaction.atomic():
        # The row lock a GDPR erasure takes too: a user erased while the cycle ran leaves no record here.
        list(DreamRun.objects.select_for_update().filter(pk=run.pk).values_list("pk", flat=True))
        run.details = drop_erased(details=totals.details, since=run.started_at)
        updated = _write_finish(run, status=status, error=error, totals=totals)
        if updated and not run.dry_run:
            _report_ended(run)
    if not updated:
        logger.warning("Dream run #%s was marked abandoned before it finished as %s", run.pk, status)


def _report_ended(run: DreamRun) -> None:
    """The ``dream.run_ended`` event, in the transaction that records the end: a run of one agent is that
    agent's to see, a run of every agent everyone's. What it changed has its own events, entry by entry."""
    event_record(
        type=EventType.DREAM_RUN_ENDED,
        user_id="",
        owner=run.only_agent,
        visibility=Visibility.SELF if run.only_agent else Visibility.GLOBAL,
        at=run.finished_at,
        data={
            "runId": run.pk,
            "status": run.status,
            "trigger": run.trigger,
            "agentId": run.only_agent or None,
            "entriesPruned": run.entries_pruned,
            "entriesFlagged": run.entries_flagged,
            "contradictionsFound": run.contradictions_found,
        },
    )


def _write_finish(run: DreamRun, *, status: str, error: str, totals: CycleTotals) -> int:
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
        **summary_counts(totals.summaries),
    )


# --- The passes, in order ----------------------------------------------------------------------------


def _users_in_scope(policies: list[DreamPolicy]) -> int:
    if any(p.cross_agent_maintenance for p in policies):
        qs = MemoryEntry.objects.all()
    else:
        qs = MemoryEntry.objects.filter(source_agent_id__in=[p.agent_id for p in policies])
    return qs.values("user_id").distinct().count()


def _run_passes(cycle: Cycle) -> None:
    """Each pass of :data:`dream.passes.PASSES` in order, for the policies it runs for (a pass none asks for
    is skipped; one with no dry run is left out of a dry run)."""
    run, totals = cycle.run, cycle.totals
    policies = list(selectors.dream_policies(agent_id=cycle.agent_id))
    cycle.total_steps = len(policies) + 1
    run.agents_processed = len(policies)
    run.users_processed = _users_in_scope(policies) if policies else 0
    heartbeat(run, totals)
    if not cycle.dry_run:
        metrics.users_processed.inc(run.users_processed)
    cycle.progress(0, "starting")
    for step in passes.PASSES:  # read when the cycle runs: the list, not a copy taken at import
        if cycle.dry_run and not step.in_dry_run:
            continue
        takers = policies if step.takes_part is None else [p for p in policies if step.takes_part(p)]
        if step.takes_part is not None and not takers:
            continue
        step.run(cycle, takers)
    cycle.progress(cycle.total_steps, "done")


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

    The passes of :data:`dream.passes.PASSES` run in order, each for the policies it runs for.
    ``dry_run`` changes no entry and reports what the cycle would do. ``on_progress(done, total, label)``
    follows the steps.
    """
    batching = Batching.from_settings(size=batch_size, pause=batch_pause)
    run = _cycle_start(trigger=trigger, agent_id=agent_id, dry_run=dry_run)
    if run.status == DreamRun.Status.SKIPPED:
        logger.info("Dream cycle skipped: %s", run.error)
        return run

    started = time.monotonic()
    totals = CycleTotals()
    cycle = Cycle(run, totals, batching, agent_id, dry_run, on_progress)
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
