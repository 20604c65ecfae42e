"""Celery tasks of user memory. They take plain values and call a service."""

from celery import shared_task
from django.conf import settings
from django.db import InterfaceError, OperationalError

from usermemory.embedding import memory_embed_entries


@shared_task(
    name="usermemory.embed_entries",
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=5,
    max_retries=3,
    time_limit=min(settings.CELERY_TASK_TIME_LIMIT, 300),
    soft_time_limit=min(settings.CELERY_TASK_SOFT_TIME_LIMIT, 240),
    acks_late=True,
)
def embed_entries_task(entry_ids: list[int]) -> int:
    """Vectors for these entries where missing or stale (queued after a write commits). An embedder failure
    is counted and left to `manage.py embed --missing`; returns the vectors written."""
    return memory_embed_entries(entry_ids=entry_ids)
