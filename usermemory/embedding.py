"""Vectors of memory entries: the entries' kind of text for :mod:`memoryplatform.embeddings.jobs`, which holds
the rules (which are missing or stale, computing them, and when a write gets them), shared with conversation
messages.

The text of an entry's vector is ``"key: value text"`` (its first EMBEDDINGS_MAX_CHARS). A write never fails
because of the embedder, and its statements never wait on it: a trigger queues the entry in the write's own
transaction (``PendingEntryVector``) and the background consumer embeds it
(:mod:`memoryplatform.embeddings.consumer`); with EMBEDDINGS_INLINE_MAX_CHARS above 0, short entries are also
embedded in the request after the commit. Every embedder failure is logged and counted
(``memory_embedding_failures_total``); the consumer tries again, and ``manage.py embed --missing`` replaces
stale vectors and those of another model.
"""

from collections.abc import Callable

from django.conf import settings
from prometheus_client import Counter, Gauge

from memoryplatform.embeddings import jobs
from memoryplatform.embeddings.jobs import ReembedBusy, Reembedded, text_hash
from memoryplatform.embeddings.store import QueueTable
from usermemory.models import MemoryEntry, PendingEntryVector
from usermemory.sql import vectors as vectors_sql

__all__ = ["ReembedBusy", "Reembedded", "text_hash"]

embedding_failures = Counter(
    "memory_embedding_failures",
    "Memory entries whose vector could not be computed when written (the embedder failed or was down).",
)
entries_embedded = Counter("memory_entries_embedded", "Memory entry vectors computed and stored.")
embeddings_pending = Gauge(
    "memory_embeddings_pending",
    "Memory entries waiting for their vector: the queue's length (read at each scrape of the web's "
    "/metrics), or during a re-embedding pass, what it has left.",
    multiprocess_mode="mostrecent",
)
reembed_runs = Counter(
    "memory_reembed_runs",
    "Runs of the background re-embedding (entries and conversation messages), by status (done, partial, "
    "skipped, failed).",
    ["status"],
)


def embedding_text(*, key: str, value_text: str) -> str:
    """The text an entry's vector is computed from (usermemory.sql.vectors writes the same expression in
    SQL)."""
    return f"{key}: {value_text}"


ENTRIES = jobs.VectorKind(
    name="memory entries",
    lock_key=MemoryEntry._meta.db_table,
    pending=vectors_sql.embeddings_pending,
    pending_count=lambda model: vectors_sql.embeddings_pending_count(model=model),
    write=vectors_sql.embeddings_write,
    queue=QueueTable.of(PendingEntryVector),
    embedded=entries_embedded,
    failures=embedding_failures,
    backlog=embeddings_pending,
)


def memory_embed_missing(
    *,
    batch_size: int,
    on_progress: Callable[[int, int], None] | None = None,
    deadline: float | None = None,
) -> Reembedded:
    """Backfill every entry whose vector is missing, stale, or of another model (:func:`jobs.embed_missing`).
    Raises EmbedderError, and ReembedBusy while another process does it."""
    return jobs.embed_missing(kind=ENTRIES, batch_size=batch_size, on_progress=on_progress, deadline=deadline)


def memory_reembed_scheduled() -> str:
    """The background re-embedding's run (the ``vectors.reembed`` task's): one pass over every
    kind of text (entries, then conversation messages: :func:`jobs.reembed_scheduled`) for at most
    EMBEDDINGS_REEMBED_SECONDS, in EMBEDDINGS_BATCH_SIZE batches. After a change of model it replaces every
    vector over as many runs as it takes. Returns its status: ``done`` (nothing left), ``partial`` (the next
    run goes on), ``skipped`` (another process is at it, or no embedder), ``failed`` (the embedder failed:
    logged, the next run tries again)."""
    status = jobs.reembed_scheduled(
        batch_size=settings.EMBEDDINGS_BATCH_SIZE, seconds=settings.EMBEDDINGS_REEMBED_SECONDS
    )
    reembed_runs.labels(status=status).inc()
    return status


def embeddings_schedule(*, entry_ids: list[int]) -> None:
    """Short entries' vectors in the request, after the commit, when EMBEDDINGS_INLINE_MAX_CHARS allows
    (:func:`jobs.schedule`); the consumer embeds every entry the write queued."""
    jobs.schedule(kind=ENTRIES, ids=entry_ids)


def embeddings_waiting(*, entry_ids: list[int]) -> int:
    """How many of these entries still wait for their vector (in the queue): what a bulk write reports."""
    return vectors_sql.embeddings_queued_among(ids=entry_ids)
