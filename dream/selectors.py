"""Reads for Dream: which policies a cycle runs, and a run as plain JSON."""

from typing import Any

from django.db.models import QuerySet

from dream.models import DreamRun
from usermemory.models import AgentMemoryPolicy


def dream_policies(*, agent_id: str | None = None) -> QuerySet[AgentMemoryPolicy]:
    """The policies of agents whose Dream is enabled (only ``agent_id``'s when given), in agent order."""
    qs = AgentMemoryPolicy.objects.filter(dream_enabled=True)
    if agent_id is not None:
        qs = qs.filter(agent_id=agent_id)
    return qs.order_by("agent_id")


def dream_run_summary(*, run: DreamRun) -> dict[str, Any]:
    """A run as JSON-safe plain values (what a Celery task returns and the command prints)."""
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
        "startedAt": run.started_at.isoformat() if run.started_at else None,
        "finishedAt": run.finished_at.isoformat() if run.finished_at else None,
        "durationSeconds": duration.total_seconds() if duration is not None else None,
        "error": run.error,
        "details": run.details,
    }
