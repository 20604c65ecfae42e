"""Vectors of stored texts, whatever stores them (memory entries, conversation messages): which are missing or
stale, computing them, and when a write gets them.

Each kind of text is a :class:`VectorKind` its app describes: its statements (the texts pending, their count,
the vectors written) and its counters. The rules are the same for all, and live here once:

- A write never fails because of the embedder, and its statements never wait on it: its texts are queued in
  its own transaction (a trigger; :class:`usermemory.models.QueuedForVector`) and the background consumer
  (:mod:`memoryplatform.embeddings.consumer`), in another process, embeds them in batches. With
  EMBEDDINGS_INLINE_MAX_CHARS above 0 and the ``local`` model, a write's short texts are also embedded in its
  request after it commits, so a search right after the write finds them by meaning.
- Every embedder failure is logged and counted; the consumer tries again after EMBEDDINGS_RETRY_SECONDS, and
  ``manage.py embed --missing`` and the scheduled re-embedding replace stale vectors and those of another
  model (:func:`embed_missing`), one pass per kind at a time (an advisory lock keyed by its table).
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

from memoryplatform.embeddings import Embedder, EmbedderError, get_embedder
from memoryplatform.embeddings.nudge import nudge_on_commit
from memoryplatform.embeddings.store import (
    QueueTable,
    queue_clock,
    queue_forget,
    queue_parked_among,
    sweep_done,
    sweep_model,
)
from memoryplatform.locks import LockId, advisory_session_try_lock, advisory_session_unlock
from memoryplatform.logsafe import exception_summary

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
    - ``queue``: its vector queue's table (filled by triggers, emptied by the consumer).
    - ``lock_key``: the key of its one-pass-at-a-time lock (its table's name).
    """

    name: str
    lock_key: str
    pending: PendingQuery
    pending_count: Callable[[str], int]
    write: VectorWrite
    queue: QueueTable
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
                sweep_done(kind=kind.lock_key, model=embedder.model_id)
                return Reembedded(written, total, complete=True)
            after = pending[-1].id
            # A text parked in the queue (it killed the consumers that claimed it) is not tried here either.
            parked = queue_parked_among(queue=kind.queue, ids=[p.id for p in pending])
            pending = [p for p in pending if p.id not in parked]
            if not pending:
                continue
            written += compute(kind=kind, embedder=embedder, pending=pending)
            done += len(pending)
            kind.backlog.set(max(total - done, 0))
            if on_progress is not None:
                on_progress(done, max(total, done))
            if deadline is not None and time.monotonic() >= deadline:
                return Reembedded(written, total, complete=False)
    finally:
        advisory_session_unlock(LockId.EMBEDDINGS, kind.lock_key)


def schedule(*, kind: VectorKind, ids: list[TextId]) -> None:
    """Once the current transaction commits, nudge the vector queue's task (every text is queued anyway, by
    the write's trigger); and with the local model and EMBEDDINGS_INLINE_MAX_CHARS above 0, embed the short
    ones of these texts in the request, so that a search right after the write finds them by meaning (the
    task skips those found current)."""
    if not ids or settings.EMBEDDINGS_PROVIDER == "none":
        return
    if settings.EMBEDDINGS_PROVIDER == "local" and settings.EMBEDDINGS_INLINE_MAX_CHARS > 0:
        wanted = list(ids)
        transaction.on_commit(lambda: _embed_short_now(kind, wanted), robust=True)
    nudge_on_commit()  # after the inline vectors: the task finds only the others


def _embed_short_now(kind: VectorKind, ids: list[TextId]) -> None:
    """Embed the short texts of these ids now; the consumer embeds the others."""
    try:
        embedder = get_embedder()
        if embedder is None:
            return
        read_at = queue_clock()  # the triggers' clock, not this host's
        pending = kind.pending(model=embedder.model_id, ids=ids, after=None, limit=len(ids))
        short = [p for p in pending if len(p.text) <= settings.EMBEDDINGS_INLINE_MAX_CHARS]
        compute(kind=kind, embedder=embedder, pending=short)
        done = {p.id for p in short} | {i for i in ids if i not in {p.id for p in pending}}
        if done:  # embedded here, or current already: the consumer has nothing to do for them
            queue_forget(queue=kind.queue, ids=list(done), before=read_at)
    except Exception as exc:  # a committed write is never failed by its vector; the consumer has it queued
        kind.failures.inc(len(ids))
        logger.warning("Embedding %d %s failed: %s", len(ids), kind.name, exception_summary(exc))


# --- The scheduled re-embedding of every kind ---------------------------------------------------------------

_KINDS: dict[str, VectorKind] = {}


def register(kind: VectorKind) -> None:
    """Add a kind to the scheduled re-embedding and `embed --missing` (its app's ``ready``), in order."""
    _KINDS.setdefault(kind.name, kind)


def registered() -> list[VectorKind]:
    return list(_KINDS.values())


# A run's status when its kinds' differ: the first of these that any kind had.
_PRECEDENCE = ("failed", "partial", "skipped", "done")


def _swept(kind: VectorKind) -> bool:
    """Whether ``kind``'s last pass reached the end with the configured model: every text written since was
    queued by its write, so a scan would find nothing."""
    embedder = get_embedder()
    return embedder is not None and sweep_model(kind=kind.lock_key) == embedder.model_id


def reembed_scheduled(*, batch_size: int, seconds: float) -> str:
    """One scheduled pass of :func:`embed_missing` over every registered kind in turn, for at most ``seconds``
    in all; a kind whose last pass reached the end with the configured model is not scanned (its later texts
    were queued by their writes, so the scan would find nothing and costs time that grows with the table).
    Returns ``done`` (nothing left), ``partial`` (the next run goes on), ``skipped`` (another process is at
    one of them, or there is no embedder) or ``failed`` (the embedder failed: logged; the next run tries
    again)."""
    if settings.EMBEDDINGS_PROVIDER == "none":
        return "skipped"
    deadline = time.monotonic() + seconds
    statuses = set()
    for kind in registered():
        try:
            if _swept(kind):
                statuses.add("done")
                continue
            result = embed_missing(kind=kind, batch_size=batch_size, deadline=deadline)
        except ReembedBusy:
            statuses.add("skipped")
            continue
        except EmbedderError as exc:
            logger.warning("Re-embedding %s failed: %s", kind.name, exception_summary(exc))
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
