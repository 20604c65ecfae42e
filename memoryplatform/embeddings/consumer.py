"""The vector queue's consumer: the one place where a write's texts get their vectors, off the request path
and out of the serving processes (issue 31, issue 34, issue 57).

- A write queues its texts in its own transaction (triggers: ``usermemory`` migration 0020, ``conversations``
  0005); as it commits, it enqueues the ``vectors.drain`` task (memoryplatform/embeddings/nudge.py). Nothing
  of the embedding runs in the request.
- The task (memoryplatform/tasks.py), in a Celery worker, :func:`drain`s: claims a batch per kind
  (:mod:`memoryplatform.embeddings.store`), embeds it, writes the vectors and removes what it embedded.
  Several workers share the work (``SKIP LOCKED``); one that dies loses nothing, and beat's sweep (the same
  task every EMBEDDINGS_SWEEP_INTERVAL seconds) catches a nudge that never came.
- It yields to requests: :func:`yield_to_requests` lowers the worker's scheduling priority
  (``BACKGROUND_NICE``) and caps the local model's threads (``BACKGROUND_EMBEDDINGS_THREADS``) before the
  model loads. Beyond that, the operating system's own means (``CPUWeight=``, another node) divide the node
  (docs/background.md).
- An embedder failure backs the batch off (``EMBEDDINGS_RETRY_SECONDS``) and is counted; the texts stay
  queued. Until its vector arrives a text is found by its words.
- A text whose claim never came back (its worker died or hung) is then embedded alone, and parked after
  ``EMBEDDINGS_MAX_ATTEMPTS`` such claims (:mod:`memoryplatform.embeddings.store`), so one text cannot stop
  every vector for good.
"""

import logging
import os
import time
from dataclasses import dataclass

from django.conf import settings
from django.utils import timezone
from prometheus_client import Gauge, Histogram

from memoryplatform.embeddings import Embedder, EmbedderError, get_embedder
from memoryplatform.embeddings.jobs import VectorKind, compute, registered
from memoryplatform.embeddings.store import queue_back_off, queue_backlog, queue_claim, queue_done
from memoryplatform.logsafe import exception_summary

logger = logging.getLogger(__name__)

vector_lag = Histogram(
    "embedding_vector_lag_seconds",
    "From a text's write (its queueing) to its vector stored by the background consumer, by kind of text.",
    ["kind"],
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600),
)
queue_parked = Gauge(
    "embedding_queue_parked",
    "Texts taken out of the vector queue after EMBEDDINGS_MAX_ATTEMPTS claims that never answered (the "
    "consumer died or hung embedding them), by kind; read from the queue at each scrape of the web's "
    "/metrics.",
    ["kind"],
    multiprocess_mode="mostrecent",
)
queue_oldest = Gauge(
    "embedding_queue_oldest_seconds",
    "Age of the oldest text waiting for its vector (0: none waits), by kind; read from the queue at each "
    "scrape of the web's /metrics.",
    ["kind"],
    multiprocess_mode="mostrecent",
)


@dataclass(frozen=True)
class Consumed:
    """One round over every kind: texts claimed, vectors written, texts whose embedding failed."""

    claimed: int = 0
    written: int = 0
    failed: int = 0

    def __add__(self, other: "Consumed") -> "Consumed":
        return Consumed(
            self.claimed + other.claimed, self.written + other.written, self.failed + other.failed
        )


def yield_to_requests() -> None:
    """Make this process a background one (the worker calls it before its pool starts: its processes inherit
    it):

    - scheduling priority BACKGROUND_NICE (unless already lower), as ``nice -n`` would start it;
    - few threads for the local model (set before it loads; OMP_NUM_THREADS already set in the environment
      wins)."""
    if settings.BACKGROUND_NICE > 0 and hasattr(os, "nice"):
        current = os.nice(0)
        if current < settings.BACKGROUND_NICE:  # idempotent: a process already that low stays as it is
            os.nice(settings.BACKGROUND_NICE - current)
    if settings.BACKGROUND_EMBEDDINGS_THREADS > 0:
        os.environ.setdefault("OMP_NUM_THREADS", str(settings.BACKGROUND_EMBEDDINGS_THREADS))


def consume_batch(*, kind: VectorKind, embedder: Embedder, batch_size: int) -> Consumed:
    """Claim up to ``batch_size`` queued texts of ``kind``, embed those whose vector is missing or stale,
    store the vectors and remove the claimed rows. An embedder failure backs them off instead."""
    claimed = queue_claim(
        queue=kind.queue,
        limit=batch_size,
        lease_seconds=settings.EMBEDDINGS_LEASE_SECONDS,
        max_attempts=settings.EMBEDDINGS_MAX_ATTEMPTS,
    )
    if not claimed:
        return Consumed()
    ids = [c.id for c in claimed]
    try:
        pending = kind.pending(model=embedder.model_id, ids=ids, after=None, limit=len(ids))
        written = compute(kind=kind, embedder=embedder, pending=pending)
    except EmbedderError as exc:
        queue_back_off(queue=kind.queue, claimed=claimed, seconds=settings.EMBEDDINGS_RETRY_SECONDS)
        kind.failures.inc(len(claimed))
        logger.warning("Embedding %d queued %s failed: %s", len(claimed), kind.name, exception_summary(exc))
        return Consumed(claimed=len(claimed), failed=len(claimed))
    queue_done(queue=kind.queue, claimed=claimed)
    now = timezone.now()
    lag = vector_lag.labels(kind=kind.name)
    for item in claimed:
        lag.observe(max((now - item.queued_at).total_seconds(), 0.0))
    return Consumed(claimed=len(claimed), written=written)


def consume_once(*, batch_size: int | None = None) -> Consumed:
    """One batch of every registered kind (none without an embedder)."""
    embedder = get_embedder()
    if embedder is None:
        return Consumed()
    size = batch_size or settings.EMBEDDINGS_BATCH_SIZE
    done = Consumed()
    for kind in registered():
        done += consume_batch(kind=kind, embedder=embedder, batch_size=size)
    return done


def drain(*, batch_size: int | None = None, deadline: float | None = None) -> Consumed:
    """Consume until no kind has a text to claim (those backed off wait), or past ``deadline``
    (``time.monotonic()``): the ``vectors.drain`` task, ``manage.py embed --drain``, tests."""
    total = Consumed()
    while True:
        done = consume_once(batch_size=batch_size)
        total += done
        if done.claimed == done.failed or (deadline is not None and time.monotonic() >= deadline):
            return total


def report_backlog() -> None:
    """Set each kind's backlog gauges from its queue."""
    now = timezone.now()
    for kind in registered():
        backlog = queue_backlog(queue=kind.queue)
        kind.backlog.set(backlog.pending)
        age = (now - backlog.oldest).total_seconds() if backlog.oldest is not None else 0.0
        queue_oldest.labels(kind=kind.name).set(max(age, 0.0))
        queue_parked.labels(kind=kind.name).set(backlog.parked)
