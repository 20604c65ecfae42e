"""The statements of the vector queue (``usermemory.models.QueuedForVector``): one table per kind of text,
filled by triggers in each write's transaction, emptied here by the consumer.

A consumer claims a batch for a lease (``not_before`` in the future hides it from the others), embeds it with
no lock held, then removes each row it claimed unless a write queued it again meanwhile (its ``queued_at``
moved): that text is embedded again by the next batch. A consumer that dies loses nothing: its lease runs out.
"""

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection, transaction
from psycopg import sql


@dataclass(frozen=True)
class QueueTable:
    """A kind's queue: its table, the column holding the text's id, and that column's SQL type."""

    table: str
    column: str
    id_type: str  # "bigint" or "uuid"


@dataclass(frozen=True)
class Claimed:
    """A claimed row: the text's id, and when it was queued (what :func:`queue_done` checks)."""

    id: Any
    queued_at: datetime


@dataclass(frozen=True)
class Backlog:
    """How many texts wait, and since when the oldest has (None: none waits)."""

    pending: int
    oldest: datetime | None


_CLAIM = """UPDATE {table} q SET not_before = now() + make_interval(secs => %(lease)s)
    WHERE q.{column} IN (
        SELECT {column} FROM {table} WHERE not_before IS NULL OR not_before <= now()
        ORDER BY queued_at LIMIT %(limit)s FOR UPDATE SKIP LOCKED)
    RETURNING q.{column}, q.queued_at"""

_DONE = """DELETE FROM {table} q
    USING unnest(%(ids)s::{id_type}[], %(queued)s::timestamptz[]) AS d(id, queued_at)
    WHERE q.{column} = d.id AND q.queued_at = d.queued_at"""

_BACK_OFF = """UPDATE {table} q SET not_before = now() + make_interval(secs => %(seconds)s)
    FROM unnest(%(ids)s::{id_type}[], %(queued)s::timestamptz[]) AS d(id, queued_at)
    WHERE q.{column} = d.id AND q.queued_at = d.queued_at"""

_FORGET = """DELETE FROM {table} WHERE {column} = ANY(%(ids)s::{id_type}[]) AND queued_at <= %(before)s"""

_BACKLOG = "SELECT count(*), min(queued_at) FROM {table}"

# usermemory.models.VectorSweep: a kind's last complete re-embedding pass, and its model.
_SWEPT = "SELECT model FROM usermemory_vectorsweep WHERE kind = %(kind)s"
_SWEEP_DONE = """INSERT INTO usermemory_vectorsweep (kind, model, completed_at)
    VALUES (%(kind)s, %(model)s, now())
    ON CONFLICT (kind) DO UPDATE SET model = EXCLUDED.model, completed_at = EXCLUDED.completed_at"""


def _statement(template: str, queue: QueueTable) -> sql.Composed:
    if queue.id_type not in ("bigint", "uuid"):
        raise ValueError(f"Unknown id type {queue.id_type!r}.")
    return sql.SQL(template).format(
        table=sql.Identifier(queue.table), column=sql.Identifier(queue.column), id_type=sql.SQL(queue.id_type)
    )


def queue_claim(*, queue: QueueTable, limit: int, lease_seconds: float) -> list[Claimed]:
    """Claim up to ``limit`` queued texts, oldest first, that no other consumer holds, for
    ``lease_seconds``."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(_statement(_CLAIM, queue), {"limit": limit, "lease": lease_seconds})
        rows = cursor.fetchall()
    return sorted((Claimed(row[0], row[1]) for row in rows), key=lambda c: c.queued_at)


def queue_done(*, queue: QueueTable, claimed: list[Claimed]) -> int:
    """Remove these rows, unless a write queued the text again since they were claimed; returns how many."""
    return _by_claim(_DONE, queue, claimed, {})


def queue_back_off(*, queue: QueueTable, claimed: list[Claimed], seconds: float) -> int:
    """Hide these rows from every consumer for ``seconds`` (their embedder failed)."""
    return _by_claim(_BACK_OFF, queue, claimed, {"seconds": seconds})


def _by_claim(template: str, queue: QueueTable, claimed: list[Claimed], params: dict[str, Any]) -> int:
    if not claimed:
        return 0
    values = {**params, "ids": [c.id for c in claimed], "queued": [c.queued_at for c in claimed]}
    with connection.cursor() as cursor:
        cursor.execute(_statement(template, queue), values)
        return cursor.rowcount


def queue_clock() -> datetime:
    """The database's clock (what the queue's triggers stamp ``queued_at`` with)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT clock_timestamp()")
        return cursor.fetchone()[0]


def queue_forget(*, queue: QueueTable, ids: list[Any], before: datetime) -> int:
    """Remove these texts' rows queued at or before ``before`` (their vectors were computed from a read made
    after it: the request's own inline embedding); a row queued later stays."""
    with connection.cursor() as cursor:
        cursor.execute(_statement(_FORGET, queue), {"ids": ids, "before": before})
        return cursor.rowcount


def queue_backlog(*, queue: QueueTable) -> Backlog:
    """The queue's length and its oldest row's time."""
    with connection.cursor() as cursor:
        cursor.execute(_statement(_BACKLOG, queue))
        count, oldest = cursor.fetchone()
    return Backlog(int(count), oldest)


def sweep_model(*, kind: str) -> str | None:
    """The model of ``kind``'s last re-embedding pass that reached the end, or None (there was none)."""
    with connection.cursor() as cursor:
        cursor.execute(_SWEPT, {"kind": kind})
        row = cursor.fetchone()
    return row[0] if row else None


def sweep_done(*, kind: str, model: str) -> None:
    """Record that a pass over ``kind`` reached the end with ``model``."""
    with connection.cursor() as cursor:
        cursor.execute(_SWEEP_DONE, {"kind": kind, "model": model})
