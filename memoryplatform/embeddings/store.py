"""The statements of the vector queue (:class:`memoryplatform.models.QueuedForVector`): one table per kind of
text, filled by triggers in each write's transaction, emptied here by the consumer; and the record of the
re-embedding passes (:class:`memoryplatform.models.VectorSweep`). The kernel owns both: nothing else writes
them (:mod:`memoryplatform.models`).

A consumer claims a batch for a lease (``not_before`` in the future hides it from the others), embeds it with
no lock held, then removes each row it claimed unless a write queued it again meanwhile (its ``queued_at``
moved): that text is embedded again by the next batch. A consumer that dies loses nothing: its lease runs out.

A text that kills its consumer must not kill the next one. Each claim counts in ``attempts``, and an answer
(done, or the embedder's error, which backs off) takes it back, so ``attempts`` counts the claims that never
came back. A row with one is a suspect: it is claimed alone, before any batch, so it takes no other text
down with it; once it reaches EMBEDDINGS_MAX_ATTEMPTS it is parked (``parked_at``, ``last_error``) and no
consumer claims it again until its text is written anew.
"""

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection, models, transaction
from psycopg import sql

from memoryplatform.models import QueuedForVector, VectorSweep

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class QueueTable:
    """A kind's queue: its table, the column holding the text's id, and that column's SQL type."""

    table: str
    column: str
    id_type: str  # "bigint" or "uuid"

    @classmethod
    def of(cls, model: type[QueuedForVector]) -> "QueueTable":
        """The queue of a concrete :class:`QueuedForVector`, from its model: its primary key is the text's
        row (a one-to-one field), whose column type is the id's."""
        key = model._meta.pk
        if key is None or not isinstance(key, models.OneToOneField):
            raise TypeError(f"{model.__name__}'s primary key must be the queued row (a one-to-one field).")
        id_type = {"BigAutoField": "bigint", "UUIDField": "uuid"}[key.target_field.get_internal_type()]
        return cls(table=model._meta.db_table, column=str(key.column), id_type=id_type)


@dataclass(frozen=True)
class Claimed:
    """A claimed row: the text's id, and when it was queued (what :func:`queue_done` checks)."""

    id: Any
    queued_at: datetime


@dataclass(frozen=True)
class Backlog:
    """How many texts wait, since when the oldest has (None: none waits), and how many are parked."""

    pending: int
    oldest: datetime | None
    parked: int = 0


# A row whose lease ran out after EMBEDDINGS_MAX_ATTEMPTS claims with no answer: parked, with why.
_PARK = """UPDATE {table} SET parked_at = now(), last_error = %(error)s
    WHERE attempts > 0 AND attempts >= %(max_attempts)s AND parked_at IS NULL
        AND (not_before IS NULL OR not_before <= now())
    RETURNING {column}"""

# A suspect alone (a claim of it never came back), else a batch of texts never claimed in vain, oldest first.
_CLAIM = """UPDATE {table} q
    SET not_before = now() + make_interval(secs => %(lease)s), attempts = q.attempts + 1
    WHERE q.{column} IN (
        SELECT {column} FROM {table}
        WHERE {suspect} AND parked_at IS NULL AND (not_before IS NULL OR not_before <= now())
        ORDER BY queued_at LIMIT %(limit)s FOR UPDATE SKIP LOCKED)
    RETURNING q.{column}, q.queued_at, q.attempts"""

_DONE = """DELETE FROM {table} q
    USING unnest(%(ids)s::{id_type}[], %(queued)s::timestamptz[]) AS d(id, queued_at)
    WHERE q.{column} = d.id AND q.queued_at = d.queued_at"""

_BACK_OFF = """UPDATE {table} q
    SET not_before = now() + make_interval(secs => %(seconds)s), attempts = greatest(q.attempts - 1, 0)
    FROM unnest(%(ids)s::{id_type}[], %(queued)s::timestamptz[]) AS d(id, queued_at)
    WHERE q.{column} = d.id AND q.queued_at = d.queued_at"""

_FORGET = """DELETE FROM {table} WHERE {column} = ANY(%(ids)s::{id_type}[]) AND queued_at <= %(before)s"""

_BACKLOG = """SELECT count(*) FILTER (WHERE parked_at IS NULL),
    min(queued_at) FILTER (WHERE parked_at IS NULL),
    count(*) FILTER (WHERE parked_at IS NOT NULL)
    FROM {table}"""

_PARKED_AMONG = """SELECT {column} FROM {table}
    WHERE {column} = ANY(%(ids)s::{id_type}[]) AND parked_at IS NOT NULL"""

# VectorSweep: a kind's last complete re-embedding pass, and its model.
_SWEEP = sql.Identifier(VectorSweep._meta.db_table)
_SWEPT = sql.SQL("SELECT model FROM {sweep} WHERE kind = %(kind)s").format(sweep=_SWEEP)
_SWEEP_DONE = sql.SQL(
    """INSERT INTO {sweep} (kind, model, completed_at)
    VALUES (%(kind)s, %(model)s, now())
    ON CONFLICT (kind) DO UPDATE SET model = EXCLUDED.model, completed_at = EXCLUDED.completed_at"""
).format(sweep=_SWEEP)


def _statement(template: str, queue: QueueTable, **parts: sql.Composable) -> sql.Composed:
    if queue.id_type not in ("bigint", "uuid"):
        raise ValueError(f"Unknown id type {queue.id_type!r}.")
    return sql.SQL(template).format(
        table=sql.Identifier(queue.table),
        column=sql.Identifier(queue.column),
        id_type=sql.SQL(queue.id_type),
        **parts,
    )


_SUSPECT = sql.SQL("attempts > 0")
_UNTRIED = sql.SQL("attempts = 0")


def parked_reason(attempts: int) -> str:
    """What a parked row's ``last_error`` says."""
    return (
        f"Claimed {attempts} times and never answered: the process embedding it died or hung each time "
        "(its lease ran out). Parked until its text is written again."
    )


def queue_claim(*, queue: QueueTable, limit: int, lease_seconds: float, max_attempts: int) -> list[Claimed]:
    """Claim queued texts that no other consumer holds, for ``lease_seconds``: a suspect alone (a claim of it
    never came back), else up to ``limit`` others, oldest first. First parks the suspects whose lease ran
    out after ``max_attempts`` claims (logged by the caller through the returned rows' absence)."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            _statement(_PARK, queue), {"max_attempts": max_attempts, "error": parked_reason(max_attempts)}
        )
        parked = [row[0] for row in cursor.fetchall()]
        rows: list[Any] = []
        for suspect, size in ((_SUSPECT, 1), (_UNTRIED, limit)):
            claim = _statement(_CLAIM, queue, suspect=suspect)
            cursor.execute(claim, {"limit": size, "lease": lease_seconds})
            rows = cursor.fetchall()
            if rows:
                break
    if parked:
        logger.error(
            "Parked %d queued %s after %d claims each that never answered (the consumer died or hung): %s",
            len(parked),
            queue.table,
            max_attempts,
            ", ".join(str(text_id) for text_id in parked[:10]),
        )
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
    """The queue's length and its oldest row's time, parked rows apart."""
    with connection.cursor() as cursor:
        cursor.execute(_statement(_BACKLOG, queue))
        count, oldest, parked = cursor.fetchone()
    return Backlog(int(count), oldest, int(parked))


def queue_parked_among(*, queue: QueueTable, ids: list[Any]) -> set[Any]:
    """Which of these texts are parked (a re-embedding pass leaves them, as the consumer does)."""
    if not ids:
        return set()
    with connection.cursor() as cursor:
        cursor.execute(_statement(_PARKED_AMONG, queue), {"ids": ids})
        return {row[0] for row in cursor.fetchall()}


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
