"""The kernel's background tasks: the vector queue's drain (the queue and its consumer are the kernel's,
memoryplatform/embeddings/). A write's commit enqueues it (memoryplatform/embeddings/nudge.py) and beat sends
it every EMBEDDINGS_SWEEP_INTERVAL seconds (the sweep); routed to the ``vectors`` queue. And the PostgreSQL
broker's housekeeping, on the ``default`` queue."""

import time
from typing import Any

from celery import shared_task
from django.conf import settings

from memoryplatform.broker import broker_prune_delivered
from memoryplatform.embeddings.consumer import drain


@shared_task(
    name="vectors.drain",
    time_limit=int(settings.EMBEDDINGS_DRAIN_SECONDS + settings.EMBEDDINGS_LEASE_SECONDS),
    soft_time_limit=int(settings.EMBEDDINGS_DRAIN_SECONDS + settings.EMBEDDINGS_LEASE_SECONDS / 2),
)
def vectors_drain() -> dict[str, Any]:
    """Embed what the vector queue holds, for at most EMBEDDINGS_DRAIN_SECONDS; when texts are left then, send
    itself again (other tasks run between). Texts a dead worker had claimed come back when their lease
    ends."""
    deadline = time.monotonic() + settings.EMBEDDINGS_DRAIN_SECONDS
    done = drain(deadline=deadline)
    more = time.monotonic() >= deadline and done.claimed > done.failed
    if more:
        vectors_drain.apply_async()
    return {"claimed": done.claimed, "written": done.written, "failed": done.failed, "more": more}


@shared_task(name="housekeeping.prune_broker", time_limit=600, soft_time_limit=540)
def housekeeping_prune_broker() -> int:
    """The PostgreSQL broker's delivered messages, older than an hour, deleted (beat's ``broker-prune``)."""
    return broker_prune_delivered()
