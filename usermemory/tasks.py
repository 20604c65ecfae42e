"""Celery tasks of user memory. They take plain values and call a service."""

from celery import shared_task
from django.conf import settings
from django.db import InterfaceError, OperationalError

from usermemory.embedding import memory_reembed_scheduled


@shared_task(
    name="usermemory.reembed",
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=30,
    max_retries=3,
    time_limit=min(settings.CELERY_TASK_TIME_LIMIT, int(settings.EMBEDDINGS_REEMBED_SECONDS) + 600),
    soft_time_limit=min(settings.CELERY_TASK_SOFT_TIME_LIMIT, int(settings.EMBEDDINGS_REEMBED_SECONDS) + 300),
    acks_late=True,
)
def reembed_task() -> str:
    """The background re-embedding (beat sends it every EMBEDDINGS_REEMBED_INTERVAL seconds): vectors missing,
    stale or of another model, for at most EMBEDDINGS_REEMBED_SECONDS. Returns the run's status (done,
    partial, skipped, failed). A partial run queues the next at once (the lock makes a beat-sent one that
    meets it skip), so a change of model is caught up without waiting for the interval."""
    status = memory_reembed_scheduled()
    if status == "partial":
        reembed_task.apply_async(expires=max(1, int(settings.EMBEDDINGS_REEMBED_INTERVAL * 0.9)))
    return status
