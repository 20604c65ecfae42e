"""Celery tasks of extraction. They take plain values, call a service and return JSON."""

from typing import Any

from celery import shared_task
from django.conf import settings
from django.db import InterfaceError, OperationalError

from extraction.background import extraction_run_background


@shared_task(
    name="extraction.run_background",
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=30,
    max_retries=3,
    time_limit=settings.CELERY_TASK_TIME_LIMIT,
    soft_time_limit=settings.CELERY_TASK_SOFT_TIME_LIMIT,
    acks_late=True,
)
def extraction_run_background_task(agent_id: str | None = None) -> dict[str, Any]:
    """One background extraction run (beat sends it every EXTRACTION_INTERVAL seconds). A run that meets
    another returns ``skipped``; a crash re-reads its batch on the next run (the watermarks)."""
    return extraction_run_background(agent_id=agent_id)
