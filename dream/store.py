"""Dream's hand-written statements: the key vectors of contradictions by meaning
(:class:`dream.models.KeyVector`), and how close entries are by their own vectors (summaries' groups).

One function per statement, keyword arguments, ``%(name)s`` placeholders filled here, identifiers from the
models composed with ``psycopg.sql.Identifier``, and a typed result.

A vector is stored as float32 bytes of unit length; :mod:`dream.meaning` reads and writes numpy arrays. The
table holds no user's id: a key leaves it when no entry holds it any more, checked through the entries' index
on ``key`` (``memory_key_user_idx``). A cycle that read a user's entries before that user's erasure may store
one of their keys after it: the next cycle's sweep removes it. The entries are only read here (usermemory
writes them).
"""

from typing import Any

import numpy as np
from django.db import connection
from psycopg import sql

from dream.models import KeyVector
from usermemory.models import EntryEmbedding, MemoryEntry

STORED = np.float32
SWEEP_BATCH = 5000  # key vectors checked per statement by the orphan sweep

KEY_VECTOR = sql.Identifier(KeyVector._meta.db_table)
ENTRY = sql.Identifier(MemoryEntry._meta.db_table)
ENTRY_VECTOR = sql.Identifier(EntryEmbedding._meta.db_table)

# The vectors of %(keys)s for %(model)s.
_READ = sql.SQL(
    "SELECT key, vector FROM {key_vector} WHERE model = %(model)s AND key = ANY(%(keys)s)"
).format(key_vector=KEY_VECTOR)

# A key stored meanwhile by another cycle keeps its vector (the same model's vector of the same text).
_WRITE = sql.SQL(
    """INSERT INTO {key_vector} (model, key, vector)
    SELECT %(model)s, k, v FROM unnest(%(keys)s::text[], %(vectors)s::bytea[]) AS t(k, v)
    ON CONFLICT (model, key) DO NOTHING"""
).format(key_vector=KEY_VECTOR)

# The vectors, of every model, of the keys that only %(user)s's entries hold.
_FORGET_USER = sql.SQL(
    """DELETE FROM {key_vector} kv
    WHERE kv.key IN (SELECT key FROM {entry} WHERE user_id = %(user)s)
        AND NOT EXISTS (SELECT 1 FROM {entry} e WHERE e.key = kv.key AND e.user_id <> %(user)s)"""
).format(key_vector=KEY_VECTOR, entry=ENTRY)

# Of the %(size)s key vectors after id %(last)s, those of another model than %(model)s or of a key no entry
# holds: deleted. Returns the batch's last id (NULL: the batch was empty) and how many went.
_SWEEP = sql.SQL(
    """WITH batch AS (
        SELECT id, model, key FROM {key_vector} WHERE id > %(last)s ORDER BY id LIMIT %(size)s
    ), gone AS (
        DELETE FROM {key_vector} kv USING batch b
        WHERE kv.id = b.id
            AND (b.model <> %(model)s OR NOT EXISTS (SELECT 1 FROM {entry} e WHERE e.key = b.key))
        RETURNING 1
    )
    SELECT (SELECT max(id) FROM batch), (SELECT count(*) FROM gone)"""
).format(key_vector=KEY_VECTOR, entry=ENTRY)


# The pairs of %(ids)s whose vectors of %(model)s are at least %(min)s alike (cosine similarity), each once.
_SIMILAR_PAIRS = sql.SQL(
    """SELECT a.entry_id, b.entry_id
    FROM {vector} a JOIN {vector} b ON a.entry_id < b.entry_id
    WHERE a.entry_id = ANY(%(ids)s) AND b.entry_id = ANY(%(ids)s)
        AND a.model = %(model)s AND b.model = %(model)s
        AND 1 - (a.embedding <=> b.embedding) >= %(min)s"""
).format(vector=ENTRY_VECTOR)


def entry_pairs_alike(*, ids: list[int], model: str, min_similarity: float) -> list[tuple[int, int]]:
    """The pairs of these entries (first id the lower) whose vectors by ``model`` have a cosine similarity of
    at least ``min_similarity``; an entry without a vector of that model is in none."""
    if len(ids) < 2:
        return []
    with connection.cursor() as cursor:
        cursor.execute(_SIMILAR_PAIRS, {"ids": ids, "model": model, "min": min_similarity})
        return [(first, second) for first, second in cursor.fetchall()]


def key_vectors_read(*, model: str, keys: list[str]) -> dict[str, np.ndarray]:
    """The stored vectors of these keys for ``model`` (those stored; float64 for the comparisons)."""
    if not keys:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(_READ, {"model": model, "keys": keys})
        rows = cursor.fetchall()
    return {key: np.frombuffer(bytes(vector), dtype=STORED).astype(np.float64) for key, vector in rows}


def key_vectors_write(*, model: str, vectors: dict[str, np.ndarray]) -> None:
    """Store these keys' vectors for ``model``; a key stored meanwhile by another cycle keeps its vector (the
    same model's vector of the same text)."""
    if not vectors:
        return
    keys = list(vectors)
    params: dict[str, Any] = {
        "model": model,
        "keys": keys,
        "vectors": [vectors[k].astype(STORED).tobytes() for k in keys],
    }
    with connection.cursor() as cursor:
        cursor.execute(_WRITE, params)


def key_vectors_forget_user(*, user_id: str) -> int:
    """At a user's erasure, before their entries go: the vectors of every model of the keys that only this
    user's entries hold. Returns how many went."""
    with connection.cursor() as cursor:
        cursor.execute(_FORGET_USER, {"user": user_id})
        return cursor.rowcount


def key_vectors_sweep(*, model: str) -> int:
    """Dream's housekeeping: remove the vectors of another model than ``model`` and of keys no entry holds
    any more (an entry deleted or renamed), ``SWEEP_BATCH`` at a time in id order, each statement its own
    transaction. Returns how many went."""
    removed, last = 0, 0
    with connection.cursor() as cursor:
        while True:
            cursor.execute(_SWEEP, {"last": last, "size": SWEEP_BATCH, "model": model})
            top, gone = cursor.fetchone()
            removed += gone
            if top is None:
                return removed
            last = top
