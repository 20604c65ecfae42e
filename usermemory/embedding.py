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
from collections.abc import Callable

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from prometheus_client import Counter

from memoryplatform.embeddings import Embedder, EmbedderError, background, get_embedder
from usermemory import store

logger = logging.getLogger(__name__)

embedding_failures = Counter(
    "memory_embedding_failures",
    "Memory entries whose vector could not be computed when written (the embedder failed or was down).",
)
entries_embedded = Counter("memory_entries_embedded", "Memory entry vectors computed and stored.")


def embedding_text(*, key: str, value_text: str) -> str:
    """The text an entry's vector is computed from (usermemory.store writes the same expression in SQL)."""
    return f"{key}: {value_text}"


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _vector_literal(vector: list[float]) -> str:
    return "[" + ",".join(repr(x) for x in vector) + "]"


def embeddings_compute(*, embedder: Embedder, pending: list[store.PendingText]) -> int:
    """Embed these texts and store their vectors; returns how many were written. Raises EmbedderError."""
    if not pending:
        return 0
    texts = [p.text for p in pending]
    # The hash is of the whole text; the model reads its head (time grows faster than linearly with length).
    vectors = embedder.embed_passages([text[: settings.EMBEDDINGS_MAX_CHARS] for text in texts])
    if len(vectors) != len(texts):
        raise EmbedderError(f"{len(vectors)} vectors for {len(texts)} texts.")
    written = store.embeddings_write(
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
        pending = store.embeddings_pending(
            model=embedder.model_id, entry_ids=entry_ids, after_id=0, limit=len(entry_ids)
        )
        return embeddings_compute(embedder=embedder, pending=pending)
    except EmbedderError as exc:
        embedding_failures.inc(len(entry_ids))
        logger.warning("Embedding %d memory entries failed: %s", len(entry_ids), exc)
        return 0


def memory_embed_missing(
    *, batch_size: int, on_progress: Callable[[int, int], None] | None = None
) -> tuple[int, int]:
    """Backfill: embed every entry whose vector is missing, stale, or of another model, in batches of
    ``batch_size`` by id. Idempotent and safe beside writes (vectors are upserted; a text changed meanwhile
    is skipped, left to its write's own hook). Raises EmbedderError. Returns (written, pending at start)."""
    embedder = get_embedder()
    if embedder is None:
        raise EmbedderError("EMBEDDINGS_PROVIDER is 'none': there is no embedder.")
    total = store.embeddings_pending_count(model=embedder.model_id)
    written = done = after = 0
    while True:
        pending = store.embeddings_pending(
            model=embedder.model_id, entry_ids=None, after_id=after, limit=batch_size
        )
        if not pending:
            break
        written += embeddings_compute(embedder=embedder, pending=pending)
        done += len(pending)
        after = pending[-1].entry_id
        if on_progress is not None:
            on_progress(done, max(total, done))
    return written, total


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
        pending = store.embeddings_pending(
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
