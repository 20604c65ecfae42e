"""Dream's background task: one cycle (beat sends it on the ``dream-cycle`` schedule, the admin's "Run Dream
now" enqueues it). It takes plain values, calls the service and returns JSON; routed to the ``dream`` queue.

Acknowledged late: a worker killed mid-cycle leaves the message to the broker, which gives it to a worker
again. Two deliveries never run two cycles at once: the cycle's advisory lock makes the second one
``skipped``.
"""

from typing import Any

from celery import shared_task
from django.conf import settings

from dream import selectors, services
from dream.models import DreamRun
from memoryplatform.broker import enqueue_once


@shared_task(
    name="dream.run_cycle",
    time_limit=settings.CELERY_TASK_TIME_LIMIT,
    soft_time_limit=settings.CELERY_TASK_SOFT_TIME_LIMIT,
)
def dream_run_cycle_task(
    agent_id: str | None = None, dry_run: bool = False, trigger: str = DreamRun.Trigger.SCHEDULE
) -> dict[str, Any]:
    """One Dream cycle; its run record says what it did (``skipped`` when another cycle holds the lock)."""
    run = services.dream_run_cycle(agent_id=agent_id, dry_run=dry_run, trigger=trigger)
    return selectors.dream_run_summary(run=run)


def dream_request_cycle() -> bool:
    """Enqueue a cycle now (the admin's "Run Dream now"); ``False`` when the broker did not take it."""
    try:  # one try: staff hear at once that the broker is down, not after kombu's retries
        enqueue_once(dream_run_cycle_task, kwargs={"trigger": DreamRun.Trigger.ADMIN})
    except Exception:  # the broker's errors (kombu, redis, SQLAlchemy): said to staff, logged by Celery
        return False
    return True
