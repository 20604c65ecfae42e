"""Extraction's background task: facts from stored conversations (beat's ``extraction-background`` schedule,
every EXTRACTION_INTERVAL seconds, with an LLM); routed to the ``extraction`` queue. A run that meets another
returns ``skipped``; one killed mid-run re-reads its batch on the next (the watermarks)."""

from typing import Any

from celery import shared_task
from django.conf import settings

from extraction.background import extraction_run_background


@shared_task(
    name="extraction.run_background",
    time_limit=settings.CELERY_TASK_TIME_LIMIT,
    soft_time_limit=settings.CELERY_TASK_SOFT_TIME_LIMIT,
)
def extraction_run_background_task(agent_id: str | None = None) -> dict[str, Any]:
    return extraction_run_background(agent_id=agent_id)
