"""Dream's pruning passes: stale entries and entries expired for the policy's retention (through
:func:`usermemory.maintenance.memory_prune_batch`, in bounded batches), and old per-turn write counters."""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Q
from django.utils import timezone

from dream.batches import Batching, in_batches
from dream.models import DreamPolicy
from dream.selectors import dream_entries
from usermemory.maintenance import memory_prune_batch, turn_counts_prune
from usermemory.models import MemoryEvent

TURN_COUNTER_RETENTION = timedelta(days=1)


@dataclass
class PruneResult:
    agent_id: str
    pruned: int
    dry_run: bool


def prunes(policy: DreamPolicy) -> bool:
    """Whether the policy prunes at all: stale entries, expired ones, or both (0 days turns each off)."""
    return bool(policy.prune_stale_after_days or policy.prune_expired_after_days)


def stale_q(*, policy: DreamPolicy, now: datetime) -> Q:
    """Entries this policy prunes (:func:`prunes` first): not seen for ``prune_stale_after_days``, or past
    their ``valid_to`` (a TTL, a given time) for ``prune_expired_after_days``; its own unless cross-agent.
    An entry a Dream summary superseded is not pruned as expired: the summary's provenance names it."""
    condition = Q(pk__in=[])
    if policy.prune_stale_after_days:
        condition |= Q(seen_at__lt=now - timedelta(days=policy.prune_stale_after_days))
    if policy.prune_expired_after_days:
        expired_before = now - timedelta(days=policy.prune_expired_after_days)
        condition |= Q(superseded_by__isnull=True, valid_to__lt=expired_before)
    if not policy.cross_agent_maintenance:
        condition &= Q(source_agent_id=policy.agent_id)
    return condition


def dream_prune_stale(
    *,
    policy: DreamPolicy,
    now: datetime | None = None,
    dry_run: bool = False,
    batching: Batching | None = None,
    actor_id: str = "dream",
    exclude: Q | None = None,
) -> PruneResult:
    """Delete the entries ``policy`` finds stale or long expired, with a ``pruned`` event each (their history
    stays). 0 days in both turns pruning off.

    ``dry_run`` counts instead (minus ``exclude``: entries an earlier dry pass of the cycle already
    counted). Returns how many entries were (or would be) pruned.
    """
    if not prunes(policy):
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
