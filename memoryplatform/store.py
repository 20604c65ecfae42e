"""The core's hand-written statements: advisory locks, the readiness probe, a table's size estimate and the
facts the database system check needs; and the one way rows of hand-written statements become model
instances (:func:`instances_from_rows`) or light rows (:func:`tuples_from_rows`).

One function per statement, keyword arguments, ``%(name)s`` placeholders filled from a dict here, and a typed
result. Nothing else in the core calls ``cursor()``.
"""

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, NamedTuple, TypeVar

from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.models import Field, Model
from psycopg import sql

M = TypeVar("M", bound=Model)


def instances_from_rows(
    model: type[M], fields: "Sequence[Field[Any, Any]]", rows: Sequence[Sequence[Any]]
) -> list[M]:
    """Instances of ``model`` from rows holding the columns of ``fields`` (concrete fields of the model, in
    that order), as Django loads them: each column converted (:func:`converted_rows`), then the documented
    ``Model.from_db`` builds the instance; the model's other fields stay deferred."""
    attnames = [f.attname for f in fields]
    return [model.from_db(connection.alias, attnames, values) for values in converted_rows(fields, rows)]


T = TypeVar("T", bound=tuple[Any, ...])


def tuples_from_rows(
    make: Callable[[Iterable[Any]], T], fields: "Sequence[Field[Any, Any]]", rows: Sequence[Sequence[Any]]
) -> list[T]:
    """Light rows (``make``: a ``NamedTuple``'s ``_make``) from rows holding the columns of ``fields``, each
    column converted (:func:`converted_rows`); no model instance built."""
    return [make(values) for values in converted_rows(fields, rows)]


def converted_rows(fields: "Sequence[Field[Any, Any]]", rows: Sequence[Sequence[Any]]) -> Iterator[list[Any]]:
    """Each row's values, each converted as its field converts what the database returns
    (``from_db_value``, the field API a custom field documents: JSON text to values)."""
    converted = [(i, f) for i, f in enumerate(fields) if hasattr(f, "from_db_value")]
    for row in rows:
        values = list(row)
        for index, field in converted:
            values[index] = field.from_db_value(values[index], None, connection)
        yield values


_RENDERED: "OrderedDict[int, tuple[sql.Composable, str]]" = OrderedDict()
_RENDERED_MAX = 1024
_RENDERED_LOCK = threading.Lock()


def query_text(statement: sql.Composable) -> str:
    """The text of a composed statement, as psycopg sends it, rendered once and kept.

    psycopg renders a ``sql.Composed`` anew on every ``execute`` (each part, each identifier quoted): about
    0.1 ms of CPU a recall or an upsert, which run one or two statements built once per process (profile
    in ``bench/RESULTS.md``, session 12). Given the text instead, psycopg only encodes it and maps the
    placeholders, which it caches by the text. The statements are constants (module-level or
    ``functools.cache``d), so they are kept by identity, the object held so that its id cannot be reused,
    in a bounded LRU: a statement composed per call would only cost its rendering, as before. Rendered on
    the current connection: identifiers are quoted by its libpq, in its encoding (Django's is always
    UTF-8)."""
    key = id(statement)
    with _RENDERED_LOCK:
        hit = _RENDERED.get(key)
        if hit is not None and hit[0] is statement:
            _RENDERED.move_to_end(key)
            return hit[1]
    connection.ensure_connection()
    rendered = statement.as_string(connection.connection)
    with _RENDERED_LOCK:
        _RENDERED[key] = (statement, rendered)
        if len(_RENDERED) > _RENDERED_MAX:
            _RENDERED.popitem(last=False)
    return rendered


# (namespace, hashtext(key)) with each of PostgreSQL's advisory lock functions.
_XACT_LOCK = sql.SQL("SELECT pg_advisory_xact_lock(%(namespace)s, hashtext(%(key)s))")
_XACT_TRY_LOCK = sql.SQL("SELECT pg_try_advisory_xact_lock(%(namespace)s, hashtext(%(key)s))")
_TRY_LOCK = sql.SQL("SELECT pg_try_advisory_lock(%(namespace)s, hashtext(%(key)s))")
_UNLOCK = sql.SQL("SELECT pg_advisory_unlock(%(namespace)s, hashtext(%(key)s))")


def _advisory(statement: sql.SQL, *, namespace: int, key: str, using: str) -> bool:
    """Run one of the advisory lock statements; its boolean answer (``pg_advisory_xact_lock`` returns none:
    ``True`` once it holds the lock)."""
    with connections[using].cursor() as cursor:
        cursor.execute(statement, {"namespace": namespace, "key": key})
        row = cursor.fetchone()
    return statement is _XACT_LOCK or bool(row and row[0])


def advisory_xact_lock(*, namespace: int, key: str, using: str = DEFAULT_DB_ALIAS) -> None:
    """Block until this transaction holds the advisory lock (namespace, hashtext(key))."""
    _advisory(_XACT_LOCK, namespace=namespace, key=key, using=using)


def advisory_xact_try_lock(*, namespace: int, key: str, using: str = DEFAULT_DB_ALIAS) -> bool:
    """Take the advisory lock (namespace, hashtext(key)) if it is free: ``False`` if another transaction
    holds it."""
    return _advisory(_XACT_TRY_LOCK, namespace=namespace, key=key, using=using)


def advisory_try_lock(*, namespace: int, key: str, using: str = DEFAULT_DB_ALIAS) -> bool:
    """Take the session advisory lock (namespace, hashtext(key)) if it is free: held until
    :func:`advisory_unlock` or the end of the session (a dead process's locks go with its connection)."""
    return _advisory(_TRY_LOCK, namespace=namespace, key=key, using=using)


def advisory_unlock(*, namespace: int, key: str, using: str = DEFAULT_DB_ALIAS) -> bool:
    """Release a session advisory lock this session holds; ``False`` if it did not hold it."""
    return _advisory(_UNLOCK, namespace=namespace, key=key, using=using)


def ping(*, using: str = DEFAULT_DB_ALIAS) -> None:
    """One round trip to the server (readiness); raises whatever the connection raises."""
    with connections[using].cursor() as cursor:
        cursor.execute(sql.SQL("SELECT 1"))
        cursor.fetchone()


_TABLE_ESTIMATE = sql.SQL("SELECT reltuples::bigint FROM pg_class WHERE oid = to_regclass(%(table)s)")


def table_estimate(*, table: str, using: str = DEFAULT_DB_ALIAS) -> int | None:
    """The planner's estimate of a table's rows (``pg_class.reltuples``, free to read); ``None`` when the
    table was never analysed (-1) or does not exist."""
    with connections[using].cursor() as cursor:
        cursor.execute(_TABLE_ESTIMATE, {"table": table})
        row = cursor.fetchone()
    if row is None or row[0] is None or row[0] < 0:
        return None
    return int(row[0])


_DISTINCT_ESTIMATE = sql.SQL(
    """SELECT s.n_distinct, c.reltuples FROM pg_stats s
    JOIN pg_class c ON c.oid = to_regclass(quote_ident(s.schemaname) || '.' || quote_ident(s.tablename))
    WHERE s.tablename = %(table)s AND s.attname = %(column)s AND s.schemaname = current_schema()"""
)


def distinct_estimate(*, table: str, column: str, using: str = DEFAULT_DB_ALIAS) -> int | None:
    """The planner's estimate of a column's distinct values (``pg_stats.n_distinct``: a count, or minus a
    fraction of the rows), free to read; ``None`` before the table was analysed."""
    with connections[using].cursor() as cursor:
        cursor.execute(_DISTINCT_ESTIMATE, {"table": table, "column": column})
        row = cursor.fetchone()
    if row is None or row[0] is None:
        return None
    n_distinct, rows = float(row[0]), float(row[1] or 0)
    if n_distinct < 0 and rows <= 0:
        return None
    return int(n_distinct if n_distinct >= 0 else -n_distinct * rows)


# The text search configuration of the stored ``search_vector`` columns (usermemory's migration 0011 creates
# it; conversations' 0003 uses it), and SEARCH_LANGUAGE's default. Before that migration has run, the database
# check does not call it missing.
STORED_SEARCH_CONFIG = "memory_simple"


class ServerFacts(NamedTuple):
    version_num: int  # server_version_num, e.g. 150004 for 15.4
    version: str  # server_version, as the server spells it
    vector_available: str | None  # pgvector's version CREATE EXTENSION would install (None: none)
    vector_installed: str | None  # pgvector's version in this database (None: not created yet)
    search_language_known: bool  # the server has a text search configuration of SEARCH_LANGUAGE's name


_SERVER_FACTS = sql.SQL(
    """SELECT current_setting('server_version_num')::int,
        current_setting('server_version'),
        EXISTS (SELECT 1 FROM pg_ts_config WHERE cfgname = split_part(%(config)s, '.', -1)),
        (SELECT default_version FROM pg_available_extensions WHERE name = %(extension)s),
        (SELECT extversion FROM pg_extension WHERE extname = %(extension)s)"""
)


def server_facts(*, search_language: str, using: str = DEFAULT_DB_ALIAS) -> ServerFacts:
    """What the database system check decides on: the server's version, the versions of ``vector`` available
    and installed, and whether a text search configuration named ``search_language`` (optionally
    schema-qualified) exists."""
    with connections[using].cursor() as cursor:
        cursor.execute(_SERVER_FACTS, {"extension": "vector", "config": search_language})
        row = cursor.fetchone()
    if row is None:  # a SELECT without FROM always returns its one row
        raise RuntimeError("the server returned no row for its own settings")
    return ServerFacts(
        version_num=int(row[0]),
        version=str(row[1]),
        search_language_known=bool(row[2]),
        vector_available=row[3],
        vector_installed=row[4],
    )


class ReplicaStatus(NamedTuple):
    lag_seconds: float | None  # None: behind, and nothing replayed since the server started
    replayed_at: Any  # datetime | None: the commit time of the last transaction replayed
    replayed_lsn: int | None  # bytes of WAL replayed (pg_last_wal_replay_lsn()); None: no standby


# The lag of a streaming replica. ``now() - pg_last_xact_replay_timestamp()`` alone grows on an idle primary
# (no commit to replay): a replica that has replayed all it received, while its WAL receiver runs, is 0
# behind. A server that is no replica (promoted) is 0 behind too.
_REPLICA_STATUS = sql.SQL(
    """SELECT CASE
            WHEN NOT pg_is_in_recovery() THEN 0.0
            WHEN pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn()
                AND EXISTS (SELECT 1 FROM pg_stat_wal_receiver) THEN 0.0
            ELSE extract(epoch FROM clock_timestamp() - pg_last_xact_replay_timestamp())::float8
        END,
        pg_last_xact_replay_timestamp(),
        (pg_last_wal_replay_lsn() - '0/0'::pg_lsn)::bigint"""
)


def replica_status(*, using: str) -> ReplicaStatus:
    """How far the replica ``using`` is behind its primary, and when the last transaction it replayed was
    committed."""
    with connections[using].cursor() as cursor:
        cursor.execute(_REPLICA_STATUS, {})
        row = cursor.fetchone()
    if row is None:  # a SELECT without FROM always returns its one row
        raise RuntimeError("the server returned no row for its replay position")
    return ReplicaStatus(
        lag_seconds=None if row[0] is None else max(float(row[0]), 0.0),
        replayed_at=row[1],
        replayed_lsn=None if row[2] is None else int(row[2]),
    )


# After a GDPR erasure commits: the primary's WAL position now is past the erasure's commit record. Only ever
# raised, by concurrent erasures too (GREATEST).
_ERASURE_FENCE_RAISE = sql.SQL(
    """INSERT INTO memoryplatform_erasurefence (id, lsn, raised_at)
    VALUES (1, (pg_current_wal_lsn() - '0/0'::pg_lsn)::bigint, now())
    ON CONFLICT (id) DO UPDATE
        SET lsn = GREATEST(memoryplatform_erasurefence.lsn, EXCLUDED.lsn), raised_at = EXCLUDED.raised_at"""
)


def erasure_fence_raise() -> None:
    """Record the primary's WAL position as the last erasure's (:class:`memoryplatform.models.ErasureFence`);
    call it once the erasure has committed."""
    with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
        cursor.execute(_ERASURE_FENCE_RAISE, {})


_ERASURE_FENCE = sql.SQL("SELECT lsn FROM memoryplatform_erasurefence WHERE id = 1")


def erasure_fence() -> int | None:
    """The last erasure's WAL position on the primary (bytes), ``None`` when there was none."""
    with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
        cursor.execute(_ERASURE_FENCE, {})
        row = cursor.fetchone()
    return None if row is None else int(row[0])


# --- The PostgreSQL broker's tables (kombu's SQLAlchemy transport: kombu_queue, kombu_message) ------------


def broker_queue_depths() -> dict[str, int]:
    """Messages waiting (not yet delivered) per queue, when this database is Celery's broker; empty before the
    transport made its tables."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT to_regclass('kombu_message') IS NOT NULL AND to_regclass('kombu_queue') IS NOT NULL"
        )
        row = cursor.fetchone()
        if not row or not row[0]:
            return {}
        cursor.execute(
            "SELECT q.name, count(m.id) FROM kombu_queue q "
            "LEFT JOIN kombu_message m ON m.queue_id = q.id AND m.visible "
            "GROUP BY q.name"
        )
        return {name: int(count) for name, count in cursor.fetchall()}


def broker_prune_delivered(*, older_than_seconds: int) -> int:
    """Delete the messages the transport delivered (``visible`` false: it keeps them) sent (its ``timestamp``
    column) more than ``older_than_seconds`` ago; returns how many."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass('kombu_message') IS NOT NULL")
        row = cursor.fetchone()
        if not row or not row[0]:
            return 0
        cursor.execute(
            "DELETE FROM kombu_message WHERE NOT visible "
            'AND "timestamp" < now() - make_interval(secs => %(older)s)',
            {"older": older_than_seconds},
        )
        return cursor.rowcount
