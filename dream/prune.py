"""Dream's pruning passes: stale entries (through :func:`usermemory.maintenance.memory_prune_batch`, in
bounded batches), and old per-turn write counters."""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Q
from django.utils import timezone

from dream.batches import Batching, in_batches
from dream.selectors import dream_entries
from usermemory.maintenance import memory_prune_batch, turn_counts_prune
from usermemory.models import AgentMemoryPolicy, MemoryEvent

TURN_COUNTER_RETENTION = timedelta(days=1)


@dataclass
class PruneResult:
    agent_id: str
    pruned: int
    dry_run: bool


def stale_q(*, policy: AgentMemoryPolicy, now: datetime) -> Q:
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
    at = now or timezone.now()
    stale = dream_entries(exclude=exclude).filter(stale_q(policy=policy, now=at))
    if dry_run:
        return PruneResult(agent_id=policy.agent_id, pruned=stale.count(), dry_run=True)
    pruned = in_batches(
        select=stale,
        apply=lambda ids: memory_prune_batch(ids=ids, actor_id=actor_id, at=at),
        batching=batching or Batching.from_settings(),
        action=MemoryEvent.Action.PRUNED,
    )
    return PruneResult(agent_id=policy.agent_id, pruned=pruned, dry_run=False)


def dream_prune_turn_counters(*, now: datetime | None = None, batching: Batching | None = None) -> int:
    """Delete per-turn write counters whose turn began over a day ago (a turn is over long before), in
    bounded batches. Returns how many were deleted."""
    return turn_counts_prune(
        before=(now or timezone.now()) - TURN_COUNTER_RETENTION,
        batch_size=(batching or Batching.from_settings()).size,
    )
