"""Vectors of stored texts, whatever stores them (memory entries, conversation messages): which are missing or
stale, computing them, and when a write gets them.

Each kind of text is a :class:`VectorKind` its app describes: its statements (the texts pending, their count,
the vectors written) and its counters. The rules are the same for all, and live here once:

- A write never fails because of the embedder, and its statements never wait on it: after it commits, its
  short texts are embedded in the request with the ``local`` model (EMBEDDINGS_INLINE_MAX_CHARS), so a search
  right after the write finds them; the rest by the kind's Celery task when a broker is configured, else by
  the process's background thread (:mod:`memoryplatform.embeddings.background`).
- Every embedder failure is logged and counted; ``manage.py embed --missing`` and the scheduled re-embedding
  fill what is left (:func:`embed_missing`), one pass per kind at a time (an advisory lock keyed by its
  table).
"""

import hashlib
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from prometheus_client import Counter, Gauge

from memoryplatform.embeddings import Embedder, EmbedderError, background, get_embedder
from memoryplatform.locks import LockId, advisory_session_try_lock, advisory_session_unlock

logger = logging.getLogger(__name__)

# A stored text's id: an entry's bigint, a message's UUID (as text, for JSON and SQL alike).
TextId = Any


@dataclass(frozen=True)
class PendingText:
    """A text whose vector is missing, stale or of another model, with its id."""

    id: TextId
    text: str


class PendingQuery(Protocol):
    def __call__(
        self, *, model: str, ids: Sequence[TextId] | None, after: TextId | None, limit: int
    ) -> list[PendingText]: ...


class VectorWrite(Protocol):
    def __call__(
        self,
        *,
        model: str,
        dimensions: int,
        ids: list[TextId],
        text_hashes: list[str],
        vectors: list[str],
        now: datetime,
    ) -> int: ...


@dataclass(frozen=True)
class VectorKind:
    """One kind of stored text that gets vectors.

    - ``pending``: the texts (of ``ids``, or all) after ``after`` in id order whose vector is missing, of
      another model, or of another text; ``pending_count``: how many in all.
    - ``write``: store vectors, upserted, never for a text gone or changed since it was read; returns the
      rows.
    - ``enqueue``: queue the kind's Celery task for these ids (raises when the broker is down).
    - ``lock_key``: the key of its one-pass-at-a-time lock (its table's name).
    """

    name: str
    lock_key: str
    pending: PendingQuery
    pending_count: Callable[[str], int]
    write: VectorWrite
    enqueue: Callable[[list[TextId]], None]
    embedded: Counter
    failures: Counter
    backlog: Gauge


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def vector_literal(vector: list[float]) -> str:
    """A vector as pgvector's text literal."""
    return "[" + ",".join(repr(float(x)) for x in vector) + "]"


def compute(*, kind: VectorKind, embedder: Embedder, pending: list[PendingText]) -> int:
    """Embed these texts and store their vectors; returns how many were written. Raises EmbedderError."""
    if not pending:
        return 0
    texts = [p.text for p in pending]
    # The hash is of the whole text; the model reads its head, EMBEDDINGS_MAX_CHARS (BoundedEmbedder, which
    # every configured embedder is: memoryplatform.embeddings.build_embedder).
    vectors = embedder.embed_passages(texts)
    if len(vectors) != len(texts):
        raise EmbedderError(f"{len(vectors)} vectors for {len(texts)} texts.")
    written = kind.write(
        model=embedder.model_id,
        dimensions=len(vectors[0]),
        ids=[p.id for p in pending],
        text_hashes=[text_hash(t) for t in texts],
        vectors=[vector_literal(v) for v in vectors],
        now=timezone.now(),
    )
    kind.embedded.inc(written)
    return written


def embed_ids(*, kind: VectorKind, ids: list[TextId]) -> int:
    """Embed those of these texts whose vector is missing or stale. Failures are logged and counted, not
    raised: the caller is a write that already committed. Returns the vectors written."""
    embedder = get_embedder()
    if embedder is None or not ids:
        return 0
    try:
        pending = kind.pending(model=embedder.model_id, ids=ids, after=None, limit=len(ids))
        return compute(kind=kind, embedder=embedder, pending=pending)
    except EmbedderError as exc:
        kind.failures.inc(len(ids))
        logger.warning("Embedding %d %s failed: %s", len(ids), kind.name, exc)
        return 0


class ReembedBusy(Exception):
    """Another process is re-embedding (it holds the lock): this pass would only repeat its batches."""


@dataclass(frozen=True)
class Reembedded:
    """What one pass did: vectors written, texts pending at its start, and whether it reached the end
    (``False``: stopped at its deadline, the next pass goes on)."""

    written: int
    pending: int
    complete: bool


def embed_missing(
    *,
    kind: VectorKind,
    batch_size: int,
    on_progress: Callable[[int, int], None] | None = None,
    deadline: float | None = None,
) -> Reembedded:
    """Backfill: embed every text of ``kind`` whose vector is missing, stale, or of another model, in
    batches of ``batch_size`` by id, each written as it comes (an old model's vector is replaced in place, so
    the text is never without one; a search meanwhile ranks only current-model vectors). Stops after the first
    batch that ends past ``deadline`` (``time.monotonic()``). One pass per kind at a time across processes (an
    advisory lock), so none repeats another's batches: ReembedBusy when one runs. Safe beside writes (vectors
    are upserted; a text changed meanwhile is skipped, left to its write's own hook). Raises EmbedderError."""
    embedder = get_embedder()
    if embedder is None:
        raise EmbedderError("EMBEDDINGS_PROVIDER is 'none': there is no embedder.")
    if not advisory_session_try_lock(LockId.EMBEDDINGS, kind.lock_key):
        raise ReembedBusy(f"Another process is re-embedding {kind.name}.")
    try:
        total = kind.pending_count(embedder.model_id)
        kind.backlog.set(total)
        written = done = 0
        after: TextId | None = None
        while True:
            pending = kind.pending(model=embedder.model_id, ids=None, after=after, limit=batch_size)
            if not pending:
                kind.backlog.set(0)
                return Reembedded(written, total, complete=True)
            written += compute(kind=kind, embedder=embedder, pending=pending)
            done += len(pending)
            after = pending[-1].id
            kind.backlog.set(max(total - done, 0))
            if on_progress is not None:
                on_progress(done, max(total, done))
            if deadline is not None and time.monotonic() >= deadline:
                return Reembedded(written, total, complete=False)
    finally:
        advisory_session_unlock(LockId.EMBEDDINGS, kind.lock_key)


def schedule(*, kind: VectorKind, ids: list[TextId]) -> None:
    """After the current transaction commits, get these texts their vectors, off the write statements.

    With the local model, the short texts (EMBEDDINGS_INLINE_MAX_CHARS: about 20 ms each here) are embedded
    in the request; anything longer, and every text of a remote embedder, goes to the kind's Celery task when
    a broker is configured, else to the process's background thread."""
    if not ids or settings.EMBEDDINGS_PROVIDER == "none":
        return
    wanted = list(ids)
    if settings.EMBEDDINGS_PROVIDER == "local" and settings.EMBEDDINGS_INLINE_MAX_CHARS > 0:
        transaction.on_commit(lambda: _embed_short_now(kind, wanted), robust=True)
    else:
        transaction.on_commit(lambda: _offload(kind, wanted), robust=True)


def _embed_short_now(kind: VectorKind, ids: list[TextId]) -> None:
    """Embed the short texts of these ids now; offload the long ones."""
    try:
        embedder = get_embedder()
        if embedder is None:
            return
        pending = kind.pending(model=embedder.model_id, ids=ids, after=None, limit=len(ids))
        short = [p for p in pending if len(p.text) <= settings.EMBEDDINGS_INLINE_MAX_CHARS]
        long = [p.id for p in pending if len(p.text) > settings.EMBEDDINGS_INLINE_MAX_CHARS]
        if long:
            _offload(kind, long)
        compute(kind=kind, embedder=embedder, pending=short)
    except Exception as exc:  # a committed write is never failed by its vector
        kind.failures.inc(len(ids))
        logger.warning("Embedding %d %s failed: %s: %s", len(ids), kind.name, type(exc).__name__, exc)


def _offload(kind: VectorKind, ids: list[TextId]) -> None:
    if settings.CELERY_TASK_ALWAYS_EAGER:
        if not background.submit(lambda: _embed_quietly(kind, ids)):
            kind.failures.inc(len(ids))
        return
    try:
        kind.enqueue(ids)
    except Exception:  # the broker is down: the texts stay missing until `embed --missing`
        kind.failures.inc(len(ids))
        logger.exception("Queueing the embedding of %d %s failed.", len(ids), kind.name)


def _embed_quietly(kind: VectorKind, ids: list[TextId]) -> None:
    try:
        embed_ids(kind=kind, ids=ids)
    except Exception:  # a committed write is never failed by its vector (a lost connection, say)
        kind.failures.inc(len(ids))
        logger.exception("Embedding %d %s failed.", len(ids), kind.name)


# --- The scheduled re-embedding of every kind ---------------------------------------------------------------

_KINDS: dict[str, VectorKind] = {}


def register(kind: VectorKind) -> None:
    """Add a kind to the scheduled re-embedding and `embed --missing` (its app's ``ready``), in order."""
    _KINDS.setdefault(kind.name, kind)


def registered() -> list[VectorKind]:
    return list(_KINDS.values())


# A run's status when its kinds' differ: the first of these that any kind had.
_PRECEDENCE = ("failed", "partial", "skipped", "done")


def reembed_scheduled(*, batch_size: int, seconds: float) -> str:
    """One scheduled pass of :func:`embed_missing` over every registered kind in turn, for at most ``seconds``
    in all. Returns ``done`` (nothing left), ``partial`` (the next run goes on), ``skipped`` (another process
    is at one of them, or there is no embedder) or ``failed`` (the embedder failed: logged; the next run tries
    again)."""
    if settings.EMBEDDINGS_PROVIDER == "none":
        return "skipped"
    deadline = time.monotonic() + seconds
    statuses = set()
    for kind in registered():
        try:
            result = embed_missing(kind=kind, batch_size=batch_size, deadline=deadline)
        except ReembedBusy:
            statuses.add("skipped")
            continue
        except EmbedderError as exc:
            logger.warning("Re-embedding %s failed: %s", kind.name, exc)
            statuses.add("failed")
            break
        status = "done" if result.complete else "partial"
        statuses.add(status)
        if result.written:
            logger.info(
                "Re-embedded %d %s (%d were pending; %s).", result.written, kind.name, result.pending, status
            )
        if not result.complete:
            break
    return next((s for s in _PRECEDENCE if s in statuses), "done")
