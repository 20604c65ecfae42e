"""Entry vectors for the bench's data set, without embedding a million texts (``bench.load --vectors``).

The generator's values are not a few templates: each is a different 100-300-character cut of one long
stream of pseudo-words, so there are as many distinct texts as memories, and the local model (about 8 ms a
short text here, 25-100 ms at these lengths) would take hours over 1M of them. Every value is made of the
generator's vocabulary (6,000 pseudo-words) and its key of a topic word, so each of those ~6,000 words is
embedded once with the configured embedder (``embed_passages``), and an entry's vector is the normalised mean
of its topic's and its value's word vectors: a bag-of-words approximation of the real vector, of the real
model's dimension, under the real model's id, with the real ``text_hash`` of ``"key: value"`` (so the
platform sees it current, not stale or missing). The search computes exact distances over a user's visible
rows (no ANN index), so its cost depends on how many rows and their dimension, not on the vectors' values:
the latencies measured on these vectors are those of real ones.

The rows go in by binary COPY, built with numpy a chunk at a time, in the binary format of the column's
type (read from the catalog, so a database still on ``vector`` loads too): pgvector's ``vector`` is int16
dimension, int16 unused, then float4 values; ``halfvec`` (usermemory 0020) the same header, then IEEE 754
binary16 values; all big-endian. numpy rounds to binary16 to nearest-even, as pgvector's own conversion does.
"""

import hashlib
import random
import struct
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

import numpy as np
import psycopg

from bench import data

EMBEDDING_TABLE = "usermemory_entryembedding"
COPY_SQL = (
    f"COPY {EMBEDDING_TABLE} (entry_id, model, dimensions, text_hash, embedding, embedded_at) "
    f"FROM STDIN (FORMAT BINARY)"
)
PG_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
CHUNK = 4096
# The binary value of each pgvector type: numpy's dtype of one component (big-endian).
COMPONENT_DTYPES = {"vector": ">f4", "halfvec": ">f2"}
COLUMN_TYPE_SQL = """SELECT t.typname FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
    WHERE a.attrelid = %(table)s::regclass AND a.attname = 'embedding'"""


def column_type(conn: psycopg.Connection) -> str:
    """The pgvector type of the vector table's ``embedding`` column (``vector`` or ``halfvec``)."""
    row = conn.execute(COLUMN_TYPE_SQL, {"table": EMBEDDING_TABLE}).fetchone()
    if row is None or row[0] not in COMPONENT_DTYPES:
        raise SystemExit(
            f"{EMBEDDING_TABLE}.embedding is {row and row[0]!r}, not one of {sorted(COMPONENT_DTYPES)}"
        )
    return str(row[0])


def word_vectors(
    *, embed: Callable[[list[str]], list[list[float]]], seed: int = 20260101
) -> tuple[dict[str, int], np.ndarray]:
    """Every word the generator uses (its vocabulary and the key topics) -> its row in a (words, dims)
    matrix of unit vectors, embedded in batches of 256."""
    words = data.vocabulary(random.Random(seed)) + list(data.TOPICS)
    rows: list[np.ndarray] = []
    for start in range(0, len(words), 256):
        rows.append(np.asarray(embed(words[start : start + 256]), dtype=np.float32))
    matrix = np.vstack(rows)
    return {w: i for i, w in enumerate(words)}, matrix


def _row_dtype(model: bytes, dims: int, component: str) -> np.dtype:
    return np.dtype(
        [
            ("nfields", ">i2"),
            ("id_len", ">i4"),
            ("id", ">i8"),
            ("model_len", ">i4"),
            ("model", f"S{len(model)}"),
            ("dims_len", ">i4"),
            ("dims", ">i4"),
            ("hash_len", ">i4"),
            ("hash", "S64"),
            ("vec_len", ">i4"),
            ("vec_dim", ">i2"),
            ("vec_unused", ">i2"),
            ("vec", component, (dims,)),
            ("ts_len", ">i4"),
            ("ts", ">i8"),
        ]
    )


def _chunks(memories: Iterator[data.Memory]) -> Iterator[list[data.Memory]]:
    chunk: list[data.Memory] = []
    for m in memories:
        chunk.append(m)
        if len(chunk) == CHUNK:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def copy_vectors(
    conn: psycopg.Connection,
    *,
    memories: Iterator[data.Memory],
    index: dict[str, int],
    matrix: np.ndarray,
    model: str,
    vector_type: str = "halfvec",
) -> int:
    """COPY one vector per memory (the normalised mean of its words' vectors) in the binary format of
    ``vector_type``; returns the rows written."""
    dims = matrix.shape[1]
    model_bytes = model.encode()
    component = COMPONENT_DTYPES[vector_type]
    dtype = _row_dtype(model_bytes, dims, component)
    now_us = int((datetime.now(UTC) - PG_EPOCH).total_seconds() * 1_000_000)
    written = 0
    with conn.cursor() as cur, cur.copy(COPY_SQL) as copy:
        copy.write(b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0))
        for chunk in _chunks(memories):
            ids: list[int] = []
            offsets: list[int] = []
            for m in chunk:
                offsets.append(len(ids))
                topic = m.key.split(".", 1)[0]
                ids.extend(index[w] for w in [topic, *m.text.split()] if w in index)
            sums = np.add.reduceat(matrix[np.asarray(ids)], np.asarray(offsets), axis=0)
            sums /= np.linalg.norm(sums, axis=1, keepdims=True)
            rows = np.zeros(len(chunk), dtype=dtype)
            rows["nfields"] = 6
            rows["id_len"], rows["model_len"], rows["dims_len"] = 8, len(model_bytes), 4
            rows["hash_len"], rows["vec_len"], rows["ts_len"] = 64, 4 + np.dtype(component).itemsize * dims, 8
            rows["id"] = [m.id for m in chunk]
            rows["model"] = model_bytes
            rows["dims"] = dims
            rows["hash"] = [hashlib.sha256(f"{m.key}: {m.text}".encode()).hexdigest().encode() for m in chunk]
            rows["vec_dim"] = dims
            rows["vec"] = sums
            rows["ts"] = now_us
            copy.write(rows.tobytes())
            written += len(chunk)
        copy.write(struct.pack(">h", -1))
    return written


def load_vectors(url: str, *, n_memories: int, n_users: int, n_agents: int) -> dict[str, float]:
    """Embed the generator's words with the configured embedder, then COPY every memory's vector."""
    from memoryplatform.embeddings import get_embedder

    embedder = get_embedder()
    if embedder is None:
        raise SystemExit("--vectors needs an embedder (EMBEDDINGS_PROVIDER is 'none')")
    timings: dict[str, float] = {}
    started = time.perf_counter()
    index, matrix = word_vectors(embed=embedder.embed_passages)
    timings["embed_words_s"] = time.perf_counter() - started
    started = time.perf_counter()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"TRUNCATE {EMBEDDING_TABLE}")
        conn.execute("SET session_replication_role = replica")  # no per-row FK check: ids are the entries'
        rows = copy_vectors(
            conn,
            memories=data.memories(n_memories=n_memories, n_users=n_users, n_agents=n_agents),
            index=index,
            matrix=matrix,
            model=embedder.model_id,
            vector_type=column_type(conn),
        )
        conn.execute("SET session_replication_role = DEFAULT")
        timings["copy_vectors_s"] = time.perf_counter() - started
        started = time.perf_counter()
        conn.execute(f"VACUUM (ANALYZE) {EMBEDDING_TABLE}")
        timings["vacuum_vectors_s"] = time.perf_counter() - started
    timings["vectors"] = float(rows)
    return timings
