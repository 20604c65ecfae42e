"""Entry vectors: the entries whose vector is missing or stale, and the vectors written.

The text an entry's vector is computed from (``usermemory.embedding.embedding_text``: ``key: value_text``)
and its SHA-256 are written here in SQL too, so that "missing or stale" is one set-based statement.
"""

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db import connection
from psycopg import sql

from memoryplatform.embeddings.jobs import PendingText
from usermemory.models import PendingEntryVector
from usermemory.sql.base import EMBEDDING, ENTRY, fetch_all, fetch_one

# Entries after %(after)s (of %(ids)s, or all) whose vector is missing, of another model, or of another text.
_PENDING_WHERE = sql.SQL(
    """e.id > %(after)s AND (%(ids)s::bigint[] IS NULL OR e.id = ANY(%(ids)s))
    AND (v.entry_id IS NULL OR v.model <> %(model)s
        OR v.text_hash <> encode(sha256(convert_to(e.key || ': ' || e.value_text, 'UTF8')), 'hex'))"""
)

_PENDING = sql.SQL(
    """SELECT e.id, e.key || ': ' || e.value_text FROM {entry} e
    LEFT JOIN {embedding} v ON v.entry_id = e.id
    WHERE {pending}
    ORDER BY e.id LIMIT %(limit)s"""
).format(entry=ENTRY, embedding=EMBEDDING, pending=_PENDING_WHERE)

_PENDING_COUNT = sql.SQL(
    """SELECT count(*) FROM {entry} e LEFT JOIN {embedding} v ON v.entry_id = e.id
    WHERE {pending}"""
).format(entry=ENTRY, embedding=EMBEDDING, pending=_PENDING_WHERE)

# Insert, or replace a vector of another model or text; not for an entry gone or whose text changed since.
# The literal is parsed as ``vector`` and stored as ``halfvec`` (the assignment rounds each component to 16
# bits; one beyond ±65504 is refused).
_WRITE = sql.SQL(
    """INSERT INTO {embedding} AS v (entry_id, model, dimensions, text_hash, embedding, embedded_at)
    SELECT n.id, %(model)s, %(dimensions)s, n.text_hash, n.vector::vector, %(now)s
    FROM unnest(%(ids)s::bigint[], %(hashes)s::text[], %(vectors)s::text[]) AS n(id, text_hash, vector)
    JOIN {entry} e ON e.id = n.id
        AND encode(sha256(convert_to(e.key || ': ' || e.value_text, 'UTF8')), 'hex') = n.text_hash
    ON CONFLICT (entry_id) DO UPDATE SET model = EXCLUDED.model, dimensions = EXCLUDED.dimensions,
        text_hash = EXCLUDED.text_hash, embedding = EXCLUDED.embedding, embedded_at = EXCLUDED.embedded_at
    WHERE (v.model, v.text_hash) IS DISTINCT FROM (EXCLUDED.model, EXCLUDED.text_hash)"""
).format(entry=ENTRY, embedding=EMBEDDING)


def embeddings_pending(
    *, model: str, ids: Sequence[int] | None, after: int | None, limit: int
) -> list[PendingText]:
    """Entries (of ``ids``, or all) after ``after`` (none: from the first) whose vector is missing, of another
    model, or of another text, in id order, with the text to embed."""
    chosen = list(ids) if ids is not None else None
    params = {"model": model, "ids": chosen, "after": after or 0, "limit": limit}  # ids are positive
    return [PendingText(entry_id, text) for entry_id, text in fetch_all(_PENDING, params)]


def embeddings_pending_count(*, model: str) -> int:
    """How many entries :func:`embeddings_pending` would return in all."""
    return int(fetch_one(_PENDING_COUNT, {"model": model, "ids": None, "after": 0})[0])


def embeddings_write(
    *,
    model: str,
    dimensions: int,
    ids: list[int],
    text_hashes: list[str],
    vectors: list[str],
    now: datetime,
) -> int:
    """Store vectors (pgvector text literals) computed from texts of these hashes: insert, or replace a vector
    of another model or text (ON CONFLICT, so concurrent writers need no check first). A vector whose entry
    is gone, or whose text changed since it was read, is not written: it would be stale. Returns the rows
    written."""
    params: dict[str, Any] = {
        "model": model,
        "dimensions": dimensions,
        "ids": ids,
        "hashes": text_hashes,
        "vectors": vectors,
        "now": now,
    }
    with connection.cursor() as cursor:
        cursor.execute(_WRITE, params)
        return cursor.rowcount


_QUEUED_AMONG = sql.SQL("SELECT count(*) FROM {queue} WHERE entry_id = ANY(%(ids)s::bigint[])").format(
    queue=sql.Identifier(PendingEntryVector._meta.db_table)
)


def embeddings_queued_among(*, ids: list[int]) -> int:
    """How many of these entries the vector queue holds (they wait for their vector)."""
    return int(fetch_one(_QUEUED_AMONG, {"ids": ids})[0]) if ids else 0
