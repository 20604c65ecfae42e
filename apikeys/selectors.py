"""Reads for agents, groups and keys."""

from django.db.models import Prefetch, Q, QuerySet
from django.utils import timezone

from apikeys.models import Agent, AgentGroup, ApiKey
from memoryplatform.errors import NotFound


def agent_list(*, status: str | None = None) -> QuerySet[Agent]:
    qs = Agent.objects.prefetch_related(Prefetch("groups", queryset=AgentGroup.objects.only("id")))
    if status:
        qs = qs.filter(status=status)
    return qs.order_by("id")


def agent_directory() -> QuerySet[Agent]:
    """The directory as any key sees it: the public fields only (no groups, keys or policy loaded)."""
    return Agent.objects.only(
        "id", "display_name", "capabilities", "model", "status", "last_active_at"
    ).order_by("id")


def agent_group_ids(*, agent_id: str) -> QuerySet[AgentGroup, str]:
    """The ids of the agent's groups, lazily: usable as a subquery, or ``list()`` it."""
    return AgentGroup.objects.filter(members=agent_id).order_by("id").values_list("id", flat=True)


def group_list() -> QuerySet[AgentGroup]:
    return AgentGroup.objects.prefetch_related(
        Prefetch("members", queryset=Agent.objects.only("id"))
    ).order_by("id")


def apikey_list(*, agent_id: str | None = None) -> QuerySet[ApiKey]:
    """Keys, newest first; with ``agent_id``, that agent's (404 when there is no such agent)."""
    qs = ApiKey.objects.select_related("agent").order_by("-created_at", "-id")
    if agent_id is None:
        return qs
    if not Agent.objects.filter(id=agent_id).exists():
        raise NotFound(f"No agent '{agent_id}'.")
    return qs.filter(agent_id=agent_id)


def agent_key_counts() -> dict[str, int]:
    """The overview's counts: agents, and the live keys (not revoked, not expired). Small tables."""
    live = Q(revoked_at__isnull=True) & (Q(expires_at__isnull=True) | Q(expires_at__gt=timezone.now()))
    return {"agents": Agent.objects.count(), "liveKeys": ApiKey.objects.filter(live).count()}
