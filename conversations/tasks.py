"""Celery tasks of conversations. They take plain values and call a service."""

from celery import shared_task
from django.conf import settings
from django.db import InterfaceError, OperationalError

from conversations.embedding import message_embed


@shared_task(
    name="conversations.embed_messages",
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=5,
    max_retries=3,
    time_limit=min(settings.CELERY_TASK_TIME_LIMIT, 300),
    soft_time_limit=min(settings.CELERY_TASK_SOFT_TIME_LIMIT, 240),
    acks_late=True,
)
def embed_messages_task(message_ids: list[str]) -> int:
    """Vectors for these messages where missing or stale (queued after a write commits). An embedder failure
    is counted and left to the scheduled re-embedding or `manage.py embed --missing`; returns the vectors
    written."""
    return message_embed(message_ids=message_ids)
