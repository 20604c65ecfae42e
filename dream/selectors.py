"""Reads for Dream: which policies a cycle runs, the entries its passes read, and a run as plain JSON."""

from datetime import datetime
from typing import Any

from django.db.models import Exists, OuterRef, Q, QuerySet
from django.db.models.functions import Coalesce

from dream.models import DreamPolicy, DreamRun
from usermemory.conflicts import dismissed_pair
from usermemory.models import MemoryEntry
from usermemory.selectors import current_q


def dream_policies(*, agent_id: str | None = None) -> QuerySet[DreamPolicy]:
    """The policies of agents whose Dream is enabled (only ``agent_id``'s when given), in agent order."""
    qs = DreamPolicy.objects.filter(dream_enabled=True)
    if agent_id is not None:
        qs = qs.filter(agent_id=agent_id)
    return qs.order_by("agent_id")


def summary_diff(*, run: DreamRun) -> list[dict[str, Any]]:
    """The run's summaries as a diff: each summary's key and text, the entries it supersedes (or would, or
    will once approved) with their keys and values, and whether it was applied."""
    diff = []
    for proposal in run.details.get("summaries", {}).get("proposals", []):
        for summary in proposal["summaries"]:
            sources = proposal["sources"]
            diff.append(
                {
                    "userId": proposal["userId"],
                    "agentId": proposal.get("agentId"),
                    "key": summary["key"],
                    "value": summary["value"],
                    "supersedes": [
                        {"id": i, "key": sources[str(i)]["key"], "value": sources[str(i)]["value"]}
                        for i in summary["sources"]
                    ],
                    "applied": proposal.get("applied", False),
                    "pending": proposal.get("pending", False),
                }
            )
    return diff


def dream_run_summary(*, run: DreamRun) -> dict[str, Any]:
    """A run as JSON-safe plain values (what the command prints)."""
    duration = run.duration
    return {
        "runId": run.pk,
        "status": run.status,
        "trigger": run.trigger,
        "dryRun": run.dry_run,
        "agentId": run.only_agent or None,
        "agentsProcessed": run.agents_processed,
        "usersProcessed": run.users_processed,
        "entriesPruned": run.entries_pruned,
        "contradictionsFound": run.contradictions_found,
        "entriesFlagged": run.entries_flagged,
        "entriesUnflagged": run.entries_unflagged,
        "entriesSummarized": run.entries_summarized,
        "summariesWritten": run.summaries_written,
        "summarizationFailures": run.summarization_failures,
        "llmCostDollars": float(run.llm_cost),
        "approval": run.approval or None,
        "startedAt": run.started_at.isoformat() if run.started_at else None,
        "finishedAt": run.finished_at.isoformat() if run.finished_at else None,
        "durationSeconds": duration.total_seconds() if duration is not None else None,
        "error": run.error,
        "details": run.details,
    }


def dream_entries(*, exclude: Q | None = None) -> QuerySet[MemoryEntry]:
    """Every entry (minus ``exclude``), with ``seen_at`` aliased: the last access, or the last update when
    never accessed."""
    qs = MemoryEntry.objects.alias(seen_at=Coalesce("last_accessed_at", "updated_at"))
    return qs.exclude(exclude) if exclude is not None else qs


def dream_current_entries(*, exclude: Q | None = None) -> QuerySet[MemoryEntry]:
    """The entries valid now (superseded and expired ones take part in no contradiction)."""
    return dream_entries(exclude=exclude).filter(current_q())


def dream_set_disagrees(*, exclude: Q | None = None) -> Exists:
    """The entry's (user, key) set holds another current value (compared by the value's text/JSON form) that
    staff did not say is no conflict (:class:`usermemory.models.ConflictDismissal`), minus ``exclude``."""
    return Exists(
        dream_current_entries(exclude=exclude)
        .filter(user_id=OuterRef("user_id"), key=OuterRef("key"))
        .exclude(value_text=OuterRef("value_text"))
        .exclude(dismissed_pair())
    )


def dream_recent_runs(*, limit: int = 5) -> list[DreamRun]:
    """The last runs, newest first: a short scan, the table holding one row a cycle."""
    return list(DreamRun.objects.order_by("-started_at", "-id")[:limit])


def dream_failed_since(*, since: datetime) -> int:
    return DreamRun.objects.filter(status=DreamRun.Status.FAILED, started_at__gte=since).count()
