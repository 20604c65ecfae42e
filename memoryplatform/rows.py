"""Model instances from the rows of hand-written SQL, converted as Django converts a query set's rows.

The hottest statements (the key lookup, recall) are written by hand and built once, because compiling them
with the ORM costs more than running them. :class:`ModelRows` names a model's columns for such a statement
and turns each slice of a returned row into an instance, with the converters Django itself would apply (JSON
text, SQLite's dates and booleans), worked out once per database vendor.
"""

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from functools import cache
from typing import Any, Generic, TypeVar

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.models import DEFERRED, Model
from django.db.models.base import ModelState
from django.db.models.signals import post_init, pre_init

M = TypeVar("M", bound=Model)
Converter = Callable[[Any, Any, Any], Any]


class ModelRows(Generic[M]):
    def __init__(self, model: type[M], *, exclude: Sequence[str] = ()) -> None:
        """``exclude``: fields the statement does not return; they are deferred (loaded on access)."""
        self.model = model
        self.fields = tuple(f for f in model._meta.concrete_fields if f.name not in exclude)
        self.attnames = tuple(f.attname for f in self.fields)
        # Where each returned column goes among the model's concrete fields; the others are DEFERRED. Handing
        # from_db a full row spares it matching every field's name against the returned ones, row by row.
        concrete = model._meta.concrete_fields
        self._slots = tuple(concrete.index(f) for f in self.fields)
        self._all_attnames = tuple(f.attname for f in concrete)
        self._new = model.__new__
        self._converters: dict[str, tuple[tuple[int, Any, tuple[Converter, ...]], ...]] = {}

    def __len__(self) -> int:
        return len(self.fields)

    def columns(self, alias: str = "") -> str:
        """The returned columns, in order, for a SELECT list or a RETURNING clause."""
        prefix = f"{alias}." if alias else ""
        return ", ".join(f"{prefix}{f.column}" for f in self.fields)

    def _converters_for(self, db: Any) -> tuple[tuple[int, Any, tuple[Converter, ...]], ...]:
        vendor = db.vendor
        if vendor not in self._converters:
            found = []
            for index, model_field in enumerate(self.fields):
                column = model_field.get_col(self.model._meta.db_table)
                functions = (*db.ops.get_db_converters(column), *model_field.get_db_converters(db))
                if functions:
                    found.append((index, column, functions))
            self._converters[vendor] = tuple(found)
        return self._converters[vendor]

    def build(self, row: Sequence[Any]) -> M:
        """An instance (as loaded from the database) from the values of :meth:`columns`, in order."""
        return self.build_all([row])[0]

    def build_all(self, rows: Iterable[Sequence[Any]]) -> list[M]:
        db = connections[DEFAULT_DB_ALIAS]  # the connection itself, not the per-thread proxy, once
        converters = self._converters_for(db)
        make = self._through_init if self._needs_init() else self._without_init
        built = []
        for row in rows:
            values = list(row)
            for index, column, functions in converters:
                for function in functions:
                    values[index] = function(values[index], column, db)
            built.append(make(db.alias, values))
        return built

    def _needs_init(self) -> bool:
        """Whether building must go through ``from_db`` and ``__init__``: a model with its own ``from_db`` or
        ``__init__``, or an init signal connected."""
        model = self.model
        own_from_db = model.from_db.__func__ is not Model.from_db.__func__  # type: ignore[attr-defined]  # a bound classmethod
        own = own_from_db or model.__init__ is not Model.__init__
        return own or pre_init.has_listeners(model) or post_init.has_listeners(model)

    def _through_init(self, alias: str, values: list[Any]) -> M:
        """Django's own way: ``from_db`` with a full row (DEFERRED for the columns not read), which runs the
        model's ``__init__`` and sends its init signals."""
        full = [DEFERRED] * len(self._all_attnames)
        for slot, value in zip(self._slots, values, strict=True):
            full[slot] = value
        return self.model.from_db(alias, self._all_attnames, full)

    def _without_init(self, alias: str, values: list[Any]) -> M:
        """What ``_through_init`` makes, without running the generic ``__init__`` (only when
        :meth:`_needs_init` allows it): the same state and attribute values at about half the cost on a
        50-row recall (a test holds the two equal). Columns not read stay deferred, loaded on access."""
        instance = self._new(self.model)
        state = instance._state = ModelState()
        state.adding, state.db = False, alias
        instance.__dict__.update(zip(self.attnames, values, strict=True))
        return instance

    def fetch(self, sql: str, params: Sequence[Any]) -> list[M]:
        """Run a statement that returns exactly :meth:`columns`, and build every row."""
        with connection.cursor() as cursor:
            native_timestamps(cursor)
            cursor.execute(sql, params)
            rows = cursor.fetchall()
        return self.build_all(rows)


def native_timestamps(cursor: Any) -> None:
    """On PostgreSQL, read ``timestamptz`` with psycopg's own loader (C, when psycopg's binary package is
    installed) on this cursor. Django's connection registers a pure-Python loader that parses every value in
    Python: about 3 us each, 0.45 ms on a 50-row recall (three timestamps a row). Both give aware datetimes
    in the session's time zone, which Django sets to UTC."""
    if connection.vendor == "postgresql":
        cursor.cursor.adapters.register_loader(*_psycopg_timestamptz_loader())


@cache
def _psycopg_timestamptz_loader() -> tuple[int, type]:
    from psycopg import postgres  # only on PostgreSQL
    from psycopg.pq import Format

    oid = postgres.types["timestamptz"].oid
    loader = postgres.adapters.get_loader(oid, Format.TEXT)
    if loader is None:
        raise RuntimeError("psycopg has no text loader for timestamptz")
    return oid, loader


@contextmanager
def prepared_cursor() -> Iterator[Any]:
    """A cursor for the hand-written statements every write runs (the key lookup, the turn count, the upsert).

    On PostgreSQL (with ``PREPARED_STATEMENTS`` on) it binds parameters on the server and runs each statement
    as a prepared statement, once parsed per connection: psycopg adapts the values in C and sends them apart
    from the SQL instead of quoting each into its text in Python, and PostgreSQL skips parsing and, once it
    settles on the generic plan, planning. Timestamps are read with psycopg's C loader
    (:func:`native_timestamps`). Queries are logged and counted as on any Django cursor. One psycopg cursor
    per connection serves every such statement, so none is built per statement. Elsewhere, or with the
    setting off, it is Django's own cursor.

    Only statements whose plan does not depend on the values belong here: a prepared statement may move to a
    generic plan after five runs (the per-user search, for one, must not; see ``bench/RESULTS.md``).
    """
    if connection.vendor != "postgresql" or not settings.PREPARED_STATEMENTS:
        with connection.cursor() as cursor:
            native_timestamps(cursor)
            yield cursor
        return
    db = connections[DEFAULT_DB_ALIAS]  # this thread's connection itself, not the proxy
    db.close_if_health_check_failed()
    db.ensure_connection()
    db.validate_thread_sharing()
    preparing, debug_wrapper = _preparing_classes()
    raw = getattr(db, "_prepared_statement_cursor", None)
    if raw is None or raw.connection is not db.connection or raw.closed:  # a new connection: a new cursor
        with db.wrap_database_errors:
            raw = preparing(db.connection)
        raw.adapters.register_loader(*_psycopg_timestamptz_loader())
        db._prepared_statement_cursor = raw  # type: ignore[attr-defined]  # our per-connection cache
    yield debug_wrapper(raw, db) if db.queries_logged else db.make_cursor(raw)


@cache
def _preparing_classes() -> tuple[type, type]:
    """Django's server-binding cursor class, preparing every statement it runs (Django's connections have
    psycopg's automatic preparation off, so it is asked for per statement), and a debug wrapper that logs the
    statement with its values as Django logs a client-bound one (a prepared statement has no query text)."""
    from django.db.backends.postgresql.base import ServerBindingCursor  # only on PostgreSQL
    from django.db.backends.utils import CursorDebugWrapper, CursorWrapper

    class PreparingCursor(ServerBindingCursor):
        def execute(self, query: Any, params: Any = None, *, prepare: bool | None = None, **kw: Any) -> Any:
            return super().execute(query, params, prepare=True, **kw)  # type: ignore[misc]  # stubs omit psycopg's Cursor base

    class PreparedDebugWrapper(CursorDebugWrapper):
        def execute(self, sql: Any, params: Any = None) -> Any:
            with self.debug_sql(self.db.ops.compose_sql(sql, params), params):
                return CursorWrapper.execute(self, sql, params)

    return PreparingCursor, PreparedDebugWrapper
