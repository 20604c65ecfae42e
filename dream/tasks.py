"""Celery tasks for Dream. They take plain values, call the service and return JSON."""

from typing import Any

from celery import shared_task
from django.conf import settings
from django.db import InterfaceError, OperationalError

from dream import selectors, services
from dream.models import DreamRun


@shared_task(
    name="dream.run_cycle",
    autoretry_for=(OperationalError, InterfaceError),  # a lost connection, a deadlock, "database is locked"
    retry_backoff=30,
    retry_backoff_max=600,
    retry_jitter=True,
    max_retries=3,
    time_limit=settings.CELERY_TASK_TIME_LIMIT,
    soft_time_limit=settings.CELERY_TASK_SOFT_TIME_LIMIT,
    acks_late=True,
)
def dream_run_cycle_task(
    agent_id: str | None = None,
    dry_run: bool = False,
    trigger: str = DreamRun.Trigger.SCHEDULE,
    batch_size: int | None = None,
    batch_pause: float | None = None,
) -> dict[str, Any]:
    """One Dream cycle (beat sends it on DREAM_SCHEDULE; the admin's "Run Dream now" too).

    A cycle that finds another one running returns with status ``skipped``. A transient database error
    fails the run (recorded ``failed``) and retries the task with backoff as a new run.
    """
    run = services.dream_run_cycle(
        agent_id=agent_id,
        dry_run=dry_run,
        trigger=trigger,
        batch_size=batch_size,
        batch_pause=batch_pause,
    )
    return selectors.dream_run_summary(run=run)
