"""Model instances from the rows of hand-written SQL, converted as Django converts a query set's rows.

The hottest statements (the key lookup, recall) are written by hand and built once, because compiling them
with the ORM costs more than running them. :class:`ModelRows` names a model's columns for such a statement
and turns each slice of a returned row into an instance, with the converters Django itself would apply (JSON
text, SQLite's dates and booleans), worked out once per database vendor.
"""

from collections.abc import Callable, Iterable, Sequence
from functools import cache
from typing import Any, Generic, TypeVar

from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.models import DEFERRED, Model

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
        from_db, alias, attnames = self.model.from_db, db.alias, self._all_attnames
        slots, width = self._slots, len(attnames)
        built = []
        for row in rows:
            values = list(row)
            for index, column, functions in converters:
                for function in functions:
                    values[index] = function(values[index], column, db)
            if len(values) != width:
                full = [DEFERRED] * width
                for slot, value in zip(slots, values, strict=True):
                    full[slot] = value
                values = full
            built.append(from_db(alias, attnames, values))
        return built

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
    return oid, postgres.adapters.get_loader(oid, Format.TEXT)
