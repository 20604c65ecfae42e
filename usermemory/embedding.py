"""Vectors of memory entries: which are missing or stale, computing them, and when a write gets them.

The text of an entry's vector is ``"key: value text"`` (its first EMBEDDINGS_MAX_CHARS). A write never fails
because of the embedder, and its statements never wait on it: after it commits, its short entries are embedded
in the request with the ``local`` model (EMBEDDINGS_INLINE_MAX_CHARS; 25-35 ms each here), so a search right
after the write finds them; the rest by a Celery task when a broker is configured, else by the process's
background thread (memoryplatform.embeddings.background). Every embedder failure is logged and counted
(``memory_embedding_failures_total``); ``manage.py embed --missing`` fills what is left.
"""

import hashlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from prometheus_client import Counter, Gauge

from memoryplatform.embeddings import Embedder, EmbedderError, background, get_embedder
from memoryplatform.locks import LockId, advisory_session_try_lock, advisory_session_unlock
from usermemory.models import MemoryEntry
from usermemory.sql import vectors as vectors_sql

logger = logging.getLogger(__name__)

embedding_failures = Counter(
    "memory_embedding_failures",
    "Memory entries whose vector could not be computed when written (the embedder failed or was down).",
)
entries_embedded = Counter("memory_entries_embedded", "Memory entry vectors computed and stored.")
embeddings_pending = Gauge(
    "memory_embeddings_pending",
    "Memory entries whose vector is missing, stale or of another model: counted when a re-embedding pass "
    "starts, less what it has done since.",
    multiprocess_mode="mostrecent",
)
reembed_runs = Counter(
    "memory_reembed_runs",
    "Runs of the background re-embedding, by status (done, partial, skipped, failed).",
    ["status"],
)


def embedding_text(*, key: str, value_text: str) -> str:
    """The text an entry's vector is computed from (usermemory.sql.vectors writes the same expression in
    SQL)."""
    return f"{key}: {value_text}"


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _vector_literal(vector: list[float]) -> str:
    return "[" + ",".join(repr(x) for x in vector) + "]"


def embeddings_compute(*, embedder: Embedder, pending: list[vectors_sql.PendingText]) -> int:
    """Embed these texts and store their vectors; returns how many were written. Raises EmbedderError."""
    if not pending:
        return 0
    texts = [p.text for p in pending]
    # The hash is of the whole text; the model reads its head, EMBEDDINGS_MAX_CHARS (BoundedEmbedder, which
    # every configured embedder is: memoryplatform.embeddings.build_embedder).
    vectors = embedder.embed_passages(texts)
    if len(vectors) != len(texts):
        raise EmbedderError(f"{len(vectors)} vectors for {len(texts)} texts.")
    written = vectors_sql.embeddings_write(
        model=embedder.model_id,
        dimensions=len(vectors[0]),
        entry_ids=[p.entry_id for p in pending],
        text_hashes=[text_hash(t) for t in texts],
        vectors=[_vector_literal(v) for v in vectors],
        now=timezone.now(),
    )
    entries_embedded.inc(written)
    return written


def memory_embed_entries(*, entry_ids: list[int]) -> int:
    """Embed those of these entries whose vector is missing or stale. Failures are logged and counted, not
    raised: the caller is a write that already committed. Returns the vectors written."""
    embedder = get_embedder()
    if embedder is None or not entry_ids:
        return 0
    try:
        pending = vectors_sql.embeddings_pending(
            model=embedder.model_id, entry_ids=entry_ids, after_id=0, limit=len(entry_ids)
        )
        return embeddings_compute(embedder=embedder, pending=pending)
    except EmbedderError as exc:
        embedding_failures.inc(len(entry_ids))
        logger.warning("Embedding %d memory entries failed: %s", len(entry_ids), exc)
        return 0


class ReembedBusy(Exception):
    """Another process is re-embedding (it holds the lock): this pass would only repeat its batches."""


@dataclass(frozen=True)
class Reembedded:
    """What one pass did: vectors written, entries pending at its start, and whether it reached the end
    (``False``: stopped at its deadline, the next pass goes on)."""

    written: int
    pending: int
    complete: bool


def memory_embed_missing(
    *,
    batch_size: int,
    on_progress: Callable[[int, int], None] | None = None,
    deadline: float | None = None,
) -> Reembedded:
    """Backfill: embed every entry whose vector is missing, stale, or of another model, in batches of
    ``batch_size`` by id, each written as it comes (an old model's vector is replaced in place, so the entry
    is never without one; a search meanwhile ranks only current-model vectors). Stops after the first batch
    that ends past ``deadline`` (``time.monotonic()``). One pass at a time across processes (an advisory
    lock), so none repeats another's batches: ReembedBusy when one runs. Safe beside writes (vectors are
    upserted; a text changed meanwhile is skipped, left to its write's own hook). Raises EmbedderError."""
    embedder = get_embedder()
    if embedder is None:
        raise EmbedderError("EMBEDDINGS_PROVIDER is 'none': there is no embedder.")
    if not advisory_session_try_lock(LockId.EMBEDDINGS, MemoryEntry._meta.db_table):
        raise ReembedBusy("Another process is re-embedding memory entries.")
    try:
        total = vectors_sql.embeddings_pending_count(model=embedder.model_id)
        embeddings_pending.set(total)
        written = done = after = 0
        while True:
            pending = vectors_sql.embeddings_pending(
                model=embedder.model_id, entry_ids=None, after_id=after, limit=batch_size
            )
            if not pending:
                embeddings_pending.set(0)
                return Reembedded(written, total, complete=True)
            written += embeddings_compute(embedder=embedder, pending=pending)
            done += len(pending)
            after = pending[-1].entry_id
            embeddings_pending.set(max(total - done, 0))
            if on_progress is not None:
                on_progress(done, max(total, done))
            if deadline is not None and time.monotonic() >= deadline:
                return Reembedded(written, total, complete=False)
    finally:
        advisory_session_unlock(LockId.EMBEDDINGS, MemoryEntry._meta.db_table)


def memory_reembed_scheduled() -> str:
    """The background re-embedding's run (Celery beat's task, or the embedded scheduler): one pass of
    :func:`memory_embed_missing` for at most EMBEDDINGS_REEMBED_SECONDS, in EMBEDDINGS_BATCH_SIZE batches.
    After a change of model it replaces every vector over as many runs as it takes. Returns its status:
    ``done`` (nothing left), ``partial`` (the next run goes on), ``skipped`` (another process is at it, or
    no embedder), ``failed`` (the embedder failed: logged, the next run tries again)."""
    if settings.EMBEDDINGS_PROVIDER == "none":
        status = "skipped"
    else:
        try:
            result = memory_embed_missing(
                batch_size=settings.EMBEDDINGS_BATCH_SIZE,
                deadline=time.monotonic() + settings.EMBEDDINGS_REEMBED_SECONDS,
            )
        except ReembedBusy:
            status = "skipped"
        except EmbedderError as exc:
            logger.warning("Re-embedding memory entries failed: %s", exc)
            status = "failed"
        else:
            status = "done" if result.complete else "partial"
            if result.written:
                logger.info(
                    "Re-embedded %d memory entries (%d were pending; %s).",
                    result.written,
                    result.pending,
                    status,
                )
    reembed_runs.labels(status=status).inc()
    return status


def embeddings_schedule(*, entry_ids: list[int]) -> None:
    """After the current transaction commits, get these entries their vectors, off the write statements.

    With the local model, the short texts (EMBEDDINGS_INLINE_MAX_CHARS: about 20 ms each here) are embedded
    in the request; anything longer, and every text of a remote embedder, goes to a Celery task when a broker
    is configured, else to the process's background thread."""
    if not entry_ids or settings.EMBEDDINGS_PROVIDER == "none":
        return
    ids = list(entry_ids)
    if settings.EMBEDDINGS_PROVIDER == "local" and settings.EMBEDDINGS_INLINE_MAX_CHARS > 0:
        transaction.on_commit(lambda: _embed_short_now(ids), robust=True)
    else:
        transaction.on_commit(lambda: _offload(ids), robust=True)


def _embed_short_now(entry_ids: list[int]) -> None:
    """Embed the short texts of these entries now; offload the long ones."""
    try:
        embedder = get_embedder()
        if embedder is None:
            return
        pending = vectors_sql.embeddings_pending(
            model=embedder.model_id, entry_ids=entry_ids, after_id=0, limit=len(entry_ids)
        )
        short = [p for p in pending if len(p.text) <= settings.EMBEDDINGS_INLINE_MAX_CHARS]
        long = [p.entry_id for p in pending if len(p.text) > settings.EMBEDDINGS_INLINE_MAX_CHARS]
        if long:
            _offload(long)
        embeddings_compute(embedder=embedder, pending=short)
    except Exception as exc:  # a committed write is never failed by its vector
        embedding_failures.inc(len(entry_ids))
        logger.warning("Embedding %d memory entries failed: %s: %s", len(entry_ids), type(exc).__name__, exc)


def _offload(entry_ids: list[int]) -> None:
    if settings.CELERY_TASK_ALWAYS_EAGER:
        _submit(entry_ids)
    else:
        _enqueue(entry_ids)


def _embed_quietly(entry_ids: list[int]) -> None:
    try:
        memory_embed_entries(entry_ids=entry_ids)
    except Exception:  # a committed write is never failed by its vector (a lost connection, say)
        embedding_failures.inc(len(entry_ids))
        logger.exception("Embedding %d memory entries failed.", len(entry_ids))


def _enqueue(entry_ids: list[int]) -> None:
    from usermemory.tasks import embed_entries_task  # the task module imports this one

    try:
        embed_entries_task.delay(entry_ids=entry_ids)
    except Exception:  # the broker is down: the entries stay missing until `embed --missing`
        embedding_failures.inc(len(entry_ids))
        logger.exception("Queueing the embedding of %d memory entries failed.", len(entry_ids))


def _submit(entry_ids: list[int]) -> None:
    if not background.submit(lambda: _embed_quietly(entry_ids)):
        embedding_failures.inc(len(entry_ids))
