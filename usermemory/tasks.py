"""User memory's background task: the re-embedding of missing, stale and other-model vectors (beat's
``vectors-reembed`` schedule, every EMBEDDINGS_REEMBED_INTERVAL seconds); routed to the ``vectors`` queue."""

from celery import shared_task
from django.conf import settings

from usermemory.embedding import memory_reembed_scheduled


@shared_task(
    name="vectors.reembed",
    time_limit=int(settings.EMBEDDINGS_REEMBED_SECONDS + settings.EMBEDDINGS_LEASE_SECONDS),
    soft_time_limit=int(settings.EMBEDDINGS_REEMBED_SECONDS + settings.EMBEDDINGS_LEASE_SECONDS / 2),
)
def vectors_reembed() -> str:
    """One run, for at most EMBEDDINGS_REEMBED_SECONDS; a run that stops there (``partial``) sends the next at
    once, so that a change of model is caught up without waiting for the interval."""
    status = memory_reembed_scheduled()
    if status == "partial":
        vectors_reembed.apply_async()
    return status
