"""Dream's steps as a list of passes (:data:`PASSES`), run in order by :mod:`dream.cycle`.

Each :class:`Pass` declares its name, the :class:`~dream.models.DreamPolicy` fields it reads (the admin lays
Dream's part of the policy out pass by pass), which agents' policies it runs for, what it runs (one function
for the real cycle and the dry run: ``cycle.dry_run`` says which, and a pass that only cleans up says it
has no dry run), what it reports (its lines of ``manage.py dream``'s summary) and its metrics (in
:mod:`dream.metrics`). The cycle, the command's report, the admin and the policy's layout iterate this list;
none of them names a pass.

A new step is then: its module (what it does, through usermemory's services), its entry here, its fields
in :class:`dream.models.DreamPolicy` with their migration, and its REST fields in :mod:`dream.api.policy`.
"""

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import Q
from django.utils import timezone

from activity.budget import llm_spend_prune
from activity.services import tool_calls_prune
from apikeys.services import agents_mark_idle
from dream import metrics
from dream.batches import Batching
from dream.contradictions import dream_contradictions_by_meaning, dream_detect_contradictions
from dream.models import DreamPolicy, DreamRun
from dream.prune import dream_prune_stale, dream_prune_turn_counters, prunes, stale_q
from dream.selectors import summary_diff
from dream.store import key_vectors_sweep
from dream.summarize import SummaryTotals, dream_summarize
from memoryplatform.embeddings import get_embedder
from memoryplatform.errors import BadRequest
from memoryplatform.llm import stored_cost
from usermemory.models import MemoryEvent, SummarizeGroupBy
from usermemory.policies import PolicyPart

ProgressCallback = Callable[[int, int, str], None]


# --- What the passes of one cycle share ---------------------------------------------------------------


@dataclass
class CycleTotals:
    pruned: int = 0
    contradictions: int = 0
    flagged: int = 0
    unflagged: int = 0
    details: dict[str, Any] = field(default_factory=lambda: {"agents": {}})
    summaries: SummaryTotals = field(default_factory=SummaryTotals)


def summary_counts(summaries: SummaryTotals) -> dict[str, Any]:
    return {
        "entries_summarized": summaries.summarized,
        "summaries_written": summaries.written,
        "summarization_failures": summaries.failures,
        "llm_cost": stored_cost(summaries.cost),
    }


def heartbeat(run: DreamRun, totals: CycleTotals) -> None:
    """Record progress: the time of the last committed batch and the counts so far."""
    DreamRun.objects.filter(pk=run.pk, status=DreamRun.Status.RUNNING).update(
        heartbeat_at=timezone.now(),
        agents_processed=run.agents_processed,
        users_processed=run.users_processed,
        entries_pruned=totals.pruned,
        contradictions_found=totals.contradictions,
        entries_flagged=totals.flagged,
        entries_unflagged=totals.unflagged,
        **summary_counts(totals.summaries),
    )


@dataclass
class Cycle:
    """What every pass of one cycle shares: its run, counts, batching, scope and progress callback, and (a
    dry run) the entries an earlier pass counted as pruned, which the later passes count as gone."""

    run: DreamRun
    totals: CycleTotals
    batching: Batching
    agent_id: str | None
    dry_run: bool
    on_progress: ProgressCallback | None
    total_steps: int = 1
    counted: Q | None = None
    held: frozenset[int] = (
        frozenset()
    )  # a dry run: the entries in the pairs by meaning it found (not flagged)

    @property
    def actor_id(self) -> str:
        return f"run:{self.run.pk}"

    @property
    def now(self) -> datetime:
        return self.run.started_at

    def progress(self, done: int, label: str) -> None:
        if self.on_progress:
            self.on_progress(done, self.total_steps, label)

    def after_batch(self, action: str, rows: int) -> None:
        """Count a committed batch (the counts of committed batches survive a failure)."""
        if action == MemoryEvent.Action.PRUNED:
            self.totals.pruned += rows
            metrics.entries_pruned.inc(rows)
        elif action == MemoryEvent.Action.FLAGGED:
            self.totals.flagged += rows
        else:
            self.totals.unflagged += rows
        heartbeat(self.run, self.totals)


# --- The passes ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Pass:
    """One step of a Dream cycle.

    ``takes_part`` picks the policies it runs for (a pass none of them asks for is skipped); ``None``: it
    runs once a cycle whatever the policies (housekeeping). ``run(cycle, policies)`` does it, or counts what
    it would do when ``cycle.dry_run``; a pass with ``in_dry_run=False`` is left out of dry runs. ``report``
    gives its lines of the command's summary from the run's summary (:func:`dream.selectors
    .dream_run_summary`: ``would`` is "would be " for a dry run). ``metrics`` names its Prometheus metrics.
    """

    name: str
    title: str
    policy_fields: tuple[str, ...]
    run: Callable[[Cycle, list[DreamPolicy]], None]
    takes_part: Callable[[DreamPolicy], bool] | None = None
    in_dry_run: bool = True
    report: Callable[[DreamRun, dict[str, Any], str], list[str]] = lambda run, summary, would: []
    metrics: tuple[str, ...] = ()


def _prune(cycle: Cycle, policies: list[DreamPolicy]) -> None:
    """Stale and long-expired entries, per agent in agent order. A dry run keeps what it counted
    (``cycle.counted``), so that each entry is counted once, as the real cycle deletes it once."""
    totals = cycle.totals
    for done, policy in enumerate(policies, start=1):
        result = dream_prune_stale(
            policy=policy,
            now=cycle.now,
            dry_run=cycle.dry_run,
            batching=cycle.batching,
            actor_id=cycle.actor_id,
            exclude=cycle.counted if cycle.dry_run else None,
        )
        if cycle.dry_run and prunes(policy):
            stale = stale_q(policy=policy, now=cycle.now)
            cycle.counted = stale if cycle.counted is None else cycle.counted | stale
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
        heartbeat(cycle.run, totals)
        cycle.progress(done, f"pruned {policy.agent_id}")


def _prune_report(run: DreamRun, summary: dict[str, Any], would: str) -> list[str]:
    lines = [f"  entries {would}pruned:  {summary['entriesPruned']}"]
    for agent_id, counts in sorted(run.details.get("agents", {}).items()):
        lines.append(f"    {agent_id}: {would}pruned {counts['pruned']}")
    return lines


def _summarize(cycle: Cycle, policies: list[DreamPolicy]) -> None:
    totals = cycle.totals
    dream_summarize(
        run=cycle.run,
        policies=policies,
        totals=totals.summaries,
        details=totals.details,
        dry_run=cycle.dry_run,
        held=cycle.held,
    )
    heartbeat(cycle.run, totals)


def _summaries_report(run: DreamRun, summary: dict[str, Any], would: str) -> list[str]:
    pending = run.approval == DreamRun.Approval.PENDING
    will = would or ("to be (after approval) " if pending else "")
    lines = [
        f"  entries {will}summarized: {summary['entriesSummarized']} into {summary['summariesWritten']} "
        f"summaries, {summary['summarizationFailures']} failed, LLM cost ${summary['llmCostDollars']:.6f}"
    ]
    for change in summary_diff(run=run):
        lines.append(f"    + {change['userId']} {change['key']!r}: {change['value']}")
        lines.extend(f"      - [{old['id']}] {old['key']!r}: {old['value']}" for old in change["supersedes"])
    for failure in run.details.get("summaries", {}).get("failures", []):
        lines.append(f"    ! {failure.get('userId', '')} {failure.get('label', '')}: {failure['error']}")
    for agent_id in run.details.get("summaries", {}).get("stoppedByCostCap", []):
        lines.append(f"    $ {agent_id}: stopped at maxCostPerRun")
    if pending:
        lines.append("  The summaries wait for staff approval on the Dream run's admin page.")
    return lines


def _contradictions(cycle: Cycle, detectors: list[DreamPolicy]) -> None:
    """Contradictions by meaning, then by (user, key) set, over the detectors' entries (every entry when one
    of them has cross-agent maintenance), as if what a dry run counted as pruned were gone."""
    totals = cycle.totals
    cross = any(p.cross_agent_maintenance for p in detectors)
    paired = dream_contradictions_by_meaning(
        detectors=detectors,
        cross=cross,
        summaries=totals.summaries,
        details=totals.details,
        dry_run=cycle.dry_run,
        exclude=cycle.counted,
    )
    found = dream_detect_contradictions(
        agent_ids=None if cross else [p.agent_id for p in detectors],
        now=cycle.now,
        dry_run=cycle.dry_run,
        batching=cycle.batching,
        actor_id=cycle.actor_id,
        exclude=cycle.counted,
    )
    totals.contradictions = found.contradictions
    totals.flagged = found.flagged
    totals.unflagged = found.unflagged
    if cycle.dry_run:
        cycle.held = frozenset(paired)  # the summaries' pass leaves them, as it leaves flagged ones
    else:
        metrics.contradictions_found.inc(found.contradictions)


def _contradictions_report(run: DreamRun, summary: dict[str, Any], would: str) -> list[str]:
    return [
        f"  contradictions found: {summary['contradictionsFound']} "
        f"({summary['entriesFlagged']} entries {would}flagged, {summary['entriesUnflagged']} {would}cleared)"
    ]


def _housekeeping(cycle: Cycle, policies: list[DreamPolicy]) -> None:
    """Old turn counters, tool calls past their agent's retention (every agent, or only ``agent_id``), the LLM
    spending past its window (:mod:`activity.budget`), (a cycle for every agent) active agents unused for
    ``AGENT_IDLE_AFTER``, and the key vectors of keys no entry holds any more or of another model than the
    embedder's (:mod:`dream.store`). Every agent's, Dream enabled or not."""
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


PASSES: tuple[Pass, ...] = (
    Pass(
        name="prune",
        title="Dream: pruning",
        policy_fields=("prune_stale_after_days", "prune_expired_after_days"),
        run=_prune,
        takes_part=lambda policy: True,  # each agent's entry in the run's details, pruning or not
        report=_prune_report,
        metrics=("dream_entries_pruned",),
    ),
    Pass(
        name="contradictions",
        title="Dream: contradictions",
        policy_fields=("detect_contradictions", "confirm_contradictions_with_llm"),
        run=_contradictions,
        takes_part=lambda policy: policy.detect_contradictions,
        report=_contradictions_report,
        metrics=("dream_contradictions_found", "dream_llm_cost_dollars"),
    ),
    Pass(
        name="summaries",
        title="Dream: summaries",
        policy_fields=(
            "summarize_interactions",
            "summarize_min_entries",
            "summarize_target_entries",
            "summarize_group_by",
            "preserve_agent_provenance",
            "summarize_requires_approval",
        ),
        run=_summarize,
        takes_part=lambda policy: policy.summarize_interactions,
        report=_summaries_report,
        metrics=("dream_entries_summarized", "dream_summarization_failed", "dream_llm_cost_dollars"),
    ),
    Pass(name="housekeeping", title="", policy_fields=(), run=_housekeeping, in_dry_run=False),
)

# The settings every pass shares: whether Dream runs for the agent, its scope, and what a cycle may spend.
CYCLE_FIELDS = (
    "dream_enabled",
    "cross_agent_maintenance",
    "max_cost_per_run",
    "max_llm_calls_per_run",
    "max_llm_calls_per_user",
)


def check_dream_policy(policy: DreamPolicy) -> None:
    """Dream's part holds together (the REST serializer bounds each field; this holds at every door)."""
    if not 1 <= policy.summarize_target_entries < max(policy.summarize_min_entries, 2):
        raise BadRequest("summarizeTargetEntries must be at least 1 and less than summarizeMinEntries.")
    if policy.summarize_group_by not in SummarizeGroupBy.values:
        raise BadRequest(f"summarizeGroupBy must be one of {', '.join(SummarizeGroupBy.values)}.")


DREAM_POLICY = PolicyPart(
    name="dream",
    model=DreamPolicy,
    groups=(
        ("Dream", CYCLE_FIELDS),
        *((each.title, each.policy_fields) for each in PASSES if each.policy_fields),
    ),
    check=check_dream_policy,
    rest="dream.api.policy.policy_fields",
)
