"""Dream's hand-written statements: the key vectors of contradictions by meaning
(:class:`dream.models.KeyVector`).

A vector is stored as float32 bytes of unit length; :mod:`dream.meaning` reads and writes numpy arrays. The
table holds no user's id: a key leaves it when no entry holds it any more, checked through the entries' index
on ``key`` (``memory_key_user_idx``). A cycle that read a user's entries before that user's erasure may store
one of their keys after it: the next cycle's sweep removes it.
"""

import numpy as np
from django.db import connection

STORED = np.float32
SWEEP_BATCH = 5000  # key vectors checked per statement by the orphan sweep


def key_vectors_read(*, model: str, keys: list[str]) -> dict[str, np.ndarray]:
    """The stored vectors of these keys for ``model`` (those stored; float64 for the comparisons)."""
    if not keys:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT key, vector FROM dream_keyvector WHERE model = %(model)s AND key = ANY(%(keys)s)",
            {"model": model, "keys": keys},
        )
        return {key: np.frombuffer(bytes(vector), dtype=STORED).astype(np.float64) for key, vector in cursor}


def key_vectors_write(*, model: str, vectors: dict[str, np.ndarray]) -> None:
    """Store these keys' vectors for ``model``; a key stored meanwhile by another cycle keeps its vector (the
    same model's vector of the same text)."""
    if not vectors:
        return
    keys = list(vectors)
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO dream_keyvector (model, key, vector) "
            "SELECT %(model)s, k, v FROM unnest(%(keys)s::text[], %(vectors)s::bytea[]) AS t(k, v) "
            "ON CONFLICT (model, key) DO NOTHING",
            {"model": model, "keys": keys, "vectors": [vectors[k].astype(STORED).tobytes() for k in keys]},
        )


def key_vectors_forget_user(*, user_id: str) -> int:
    """At a user's erasure, before their entries go: the vectors of every model of the keys that only this
    user's entries hold. Returns how many went."""
    with connection.cursor() as cursor:
        cursor.execute(
            "DELETE FROM dream_keyvector kv "
            "WHERE kv.key IN (SELECT key FROM usermemory_memoryentry WHERE user_id = %(user)s) "
            "AND NOT EXISTS (SELECT 1 FROM usermemory_memoryentry e "
            "WHERE e.key = kv.key AND e.user_id <> %(user)s)",
            {"user": user_id},
        )
        return cursor.rowcount


def key_vectors_sweep(*, model: str) -> int:
    """Dream's housekeeping: remove the vectors of another model than ``model`` and of keys no entry holds
    any more (an entry deleted or renamed), ``SWEEP_BATCH`` at a time in id order, each statement its own
    transaction. Returns how many went."""
    removed, last = 0, 0
    with connection.cursor() as cursor:
        while True:
            cursor.execute(
                "WITH batch AS (SELECT id, model, key FROM dream_keyvector WHERE id > %(last)s "
                "ORDER BY id LIMIT %(size)s), "
                "gone AS (DELETE FROM dream_keyvector kv USING batch b WHERE kv.id = b.id "
                "AND (b.model <> %(model)s OR NOT EXISTS "
                "(SELECT 1 FROM usermemory_memoryentry e WHERE e.key = b.key)) RETURNING 1) "
                "SELECT (SELECT max(id) FROM batch), (SELECT count(*) FROM gone)",
                {"last": last, "size": SWEEP_BATCH, "model": model},
            )
            top, gone = cursor.fetchone()
            removed += gone
            if top is None:
                return removed
            last = top
