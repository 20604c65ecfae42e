"""What every statement of user memory shares: the tables, the clauses that say which entries a read sees
(visible, valid now, sure enough), the entry columns a read returns, a recall's access marks, the rows turned
into entries (model instances, or the light :class:`EntryRow`), the cursor, and the user's recall lock.

Clauses are :class:`psycopg.sql.SQL` fragments with identifiers composed by ``sql.Identifier`` and
``%(name)s`` placeholders that the function running the statement fills (:func:`scope_params` for the
ones named here). Nothing here imports from above ``usermemory.sql``.
"""

from collections.abc import Sequence
from datetime import datetime
from functools import cache
from typing import Any, NamedTuple

import psycopg
from django.conf import settings
from django.db import connection
from django.db.models import Field
from psycopg import sql

from apikeys.models import AgentGroup
from memoryplatform.locks import LockId
from memoryplatform.store import instances_from_rows, query_text, tuples_from_rows
from usermemory.models import (
    EntryEmbedding,
    MemoryEntry,
    MemoryEntryGroup,
    MemoryEvent,
    RecallOrder,
    TurnWriteCount,
)

ENTRY = sql.Identifier(MemoryEntry._meta.db_table)
ENTRY_GROUP = sql.Identifier(MemoryEntryGroup._meta.db_table)
EVENT = sql.Identifier(MemoryEvent._meta.db_table)
TURN = sql.Identifier(TurnWriteCount._meta.db_table)
EMBEDDING = sql.Identifier(EntryEmbedding._meta.db_table)
_MEMBERS = AgentGroup.members.through._meta
MEMBERS = sql.Identifier(_MEMBERS.db_table)
MEMBER_GROUP = sql.Identifier(_MEMBERS.get_field("agentgroup").column)
MEMBER_AGENT = sql.Identifier(_MEMBERS.get_field("agent").column)

# The search columns, which no reader of an entry needs: recall and search leave them deferred.
SEARCH_ONLY = frozenset({"value_text", "key_folded", "text_folded"})
ENTRY_FIELDS = tuple(f for f in MemoryEntry._meta.concrete_fields if f.name not in SEARCH_ONLY)
EVENT_FIELDS = tuple(MemoryEvent._meta.concrete_fields)


class EntryRow(NamedTuple):
    """An entry as a plain recall returns it: the columns an answer shows (every door's output of an entry),
    JSON decoded, timestamps aware, and nothing else; a tuple, not a model instance. Building 40 instances
    (``Model.from_db``) was a third of a recall's Python CPU (``bench/RESULTS.md``, session 12). Its fields
    are named as :class:`MemoryEntry`'s attributes, so what reads an entry's answer fields reads either."""

    id: int
    user_id: str
    key: str
    value: Any
    category: str
    visibility: str
    source_agent_id: str | None
    group_ids: list[str]
    source_conversation_id: str | None
    conflicted: bool
    access_count: int
    created_at: datetime
    updated_at: datetime
    last_accessed_at: datetime | None
    valid_from: datetime
    valid_to: datetime | None
    superseded_by_id: int | None
    confidence: float | None
    source: str | None
    observed_at: datetime


# What a read of entries may hand on to an answer: model instances (search, list) or rows (plain recall).
AnyEntry = MemoryEntry | EntryRow

_FIELD_OF = {f.attname: f for f in MemoryEntry._meta.concrete_fields}
ROW_FIELDS = tuple(_FIELD_OF[name] for name in EntryRow._fields)  # a renamed field fails here, at import

# Groups of a read: a list of group ids, or ``None`` for every group the agent is a member of (read by a
# subquery of the same statement, so it costs no round trip).
Groups = list[str] | None


def scope_params(
    *,
    user_id: str,
    agent_id: str | None,
    group_ids: Groups,
    include_superseded: bool = False,
    min_confidence: float | None = None,
) -> dict[str, Any]:
    """The values of the placeholders of :func:`visible`, :data:`CURRENT` and :data:`MIN_CONFIDENCE`."""
    return {
        "user": user_id,
        "agent": agent_id,
        "groups": group_ids or [],
        "all_times": include_superseded,
        "min_confidence": min_confidence,
    }


class RecallScope(NamedTuple):
    """What a recall (by order or by relevance) reads and how it marks the access: the entries of
    ``user_id`` visible to ``agent_id`` in ``group_ids``, sure enough (``min_confidence``); ``order`` says
    whether ``access_count`` counts (:func:`access_marks`), ``last_accessed_at`` moves to ``now`` where it is
    older than ``threshold``. ``agent_view``: the ``conflicted`` flag the agent may see (an agent key's
    read), else the stored one."""

    user_id: str
    agent_id: str
    group_ids: Groups
    order: str
    threshold: datetime
    now: datetime
    agent_view: bool
    min_confidence: float | None = None

    def params(self) -> dict[str, Any]:
        """The values of the placeholders of :func:`visible`, :data:`MIN_CONFIDENCE` and the access marks."""
        return {
            **scope_params(
                user_id=self.user_id,
                agent_id=self.agent_id,
                group_ids=self.group_ids,
                min_confidence=self.min_confidence,
            ),
            "threshold": self.threshold,
            "now": self.now,
        }


# --- Clauses ------------------------------------------------------------------------------------------

# The read's groups: the listed ones (%(groups)s), or every group the agent (%(agent)s) is a member of.
LISTED_GROUPS = sql.SQL("SELECT unnest(%(groups)s::text[])")
AGENT_GROUPS = sql.SQL("SELECT {group} FROM {members} WHERE {agent} = %(agent)s").format(
    group=MEMBER_GROUP, members=MEMBERS, agent=MEMBER_AGENT
)

# Valid now: not superseded by a Dream summary, and no ``valid_to`` or one still ahead; ``%(all_times)s``
# (``?includeSuperseded=true``) lifts it. The ORM's form of the same test: usermemory.selectors.current_q.
CURRENT = sql.SQL("(%(all_times)s OR (superseded_by_id IS NULL AND (valid_to IS NULL OR valid_to > now())))")

# ``minConfidence``: only entries at least this sure (none without a confidence); NULL keeps every entry.
MIN_CONFIDENCE = sql.SQL("(%(min_confidence)s::float8 IS NULL OR confidence >= %(min_confidence)s::float8)")


@cache
def visible(*, all_of_agent: bool) -> sql.Composed:
    """Visible(user, agent, groups) over the entry columns in scope: ``%(user)s``, ``%(agent)s`` and the
    groups (:data:`AGENT_GROUPS` or :data:`LISTED_GROUPS`), of the entries valid now (:data:`CURRENT`)."""
    return sql.SQL(
        """user_id = %(user)s AND (
            visibility = 'global'
            OR (visibility = 'self' AND source_agent_id = %(agent)s)
            OR (visibility = 'group' AND id IN (
                SELECT entry_id FROM {entry_group} WHERE user_id = %(user)s AND group_id IN ({groups})
            ))
        ) AND {current}"""
    ).format(
        entry_group=ENTRY_GROUP,
        groups=AGENT_GROUPS if all_of_agent else LISTED_GROUPS,
        current=CURRENT,
    )


@cache
def readable(*, agent_view: bool, all_of_agent: bool) -> sql.Composable:
    """The user's entries a read returns: an agent's, the visible ones (:func:`visible`); a viewer's or an
    admin's, all of them; valid now either way (:data:`CURRENT`)."""
    if agent_view:
        return visible(all_of_agent=all_of_agent)
    return sql.SQL("user_id = %(user)s AND {current}").format(current=CURRENT)


@cache
def entry_columns(*, agent_view: bool, all_of_agent: bool) -> sql.Composed:
    """The entry columns search returns (:data:`ENTRY_FIELDS`, in order), ``conflicted`` as
    :func:`columns_of` writes it."""
    return columns_of(ENTRY_FIELDS, agent_view=agent_view, all_of_agent=all_of_agent)


@cache
def row_columns(*, agent_view: bool, all_of_agent: bool) -> sql.Composed:
    """The entry columns of an :class:`EntryRow` (:data:`ROW_FIELDS`, in order), ``conflicted`` as
    :func:`columns_of` writes it."""
    return columns_of(ROW_FIELDS, agent_view=agent_view, all_of_agent=all_of_agent)


def columns_of(fields: "Sequence[Field[Any, Any]]", *, agent_view: bool, all_of_agent: bool) -> sql.Composed:
    """The columns of these entry fields, in order. In an agent's read (``agent_view``) ``conflicted`` is what
    that agent may see: a stored flag holds only while another entry of the set that the agent sees has
    another value, so the flag never reveals a value the agent cannot see."""
    seen_conflict = sql.SQL(
        """CASE WHEN {entry}.conflicted THEN EXISTS (
            SELECT 1 FROM {entry} AS other
            WHERE (other.key = {entry}.key OR other.id = ANY({entry}.meaning_conflicts))
                AND other.value_text <> {entry}.value_text
                AND {visible}
        ) ELSE false END"""
    ).format(entry=ENTRY, visible=visible(all_of_agent=all_of_agent))
    table = MemoryEntry._meta.db_table
    return sql.SQL(", ").join(
        [
            seen_conflict if agent_view and f.column == "conflicted" else sql.Identifier(table, str(f.column))
            for f in fields
        ]
    )


@cache
def access_marks(*, order: str) -> sql.SQL:
    """The SET list of a recall's UPDATE: ``last_accessed_at`` moves to ``%(now)s`` where older than
    ``%(threshold)s``; only ``most_accessed`` counts an access (EDDI: ``most_recent`` has no side effect on
    ``access_count``)."""
    last_accessed = """last_accessed_at = CASE
        WHEN last_accessed_at IS NULL OR last_accessed_at < %(threshold)s THEN %(now)s
        ELSE last_accessed_at END"""
    if order == RecallOrder.MOST_ACCESSED:
        return sql.SQL("access_count = access_count + 1, " + last_accessed)
    return sql.SQL(last_accessed)


# --- Rows ----------------------------------------------------------------------------------------------


def entries_of_rows(rows: Sequence[Sequence[Any]]) -> list[MemoryEntry]:
    """Entries from rows of :func:`entry_columns` (the search columns stay deferred)."""
    return instances_from_rows(MemoryEntry, ENTRY_FIELDS, rows)


def entry_rows(rows: Sequence[Sequence[Any]]) -> list[EntryRow]:
    """Light entries from rows of :func:`row_columns`, no model instance built."""
    return tuples_from_rows(EntryRow._make, ROW_FIELDS, rows)


def events_of_rows(rows: Sequence[Sequence[Any]]) -> list[MemoryEvent]:
    """Events from rows of every event column (:data:`EVENT_FIELDS`)."""
    return instances_from_rows(MemoryEvent, EVENT_FIELDS, rows)


# --- The cursor ----------------------------------------------------------------------------------------


def fetch_all(statement: sql.Composable, params: dict[str, Any]) -> list[tuple[Any, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(query_text(statement), params)
        return cursor.fetchall()


def fetch_one(statement: sql.Composable, params: dict[str, Any]) -> tuple[Any, ...]:
    """The one row of a statement that always returns one."""
    with connection.cursor() as cursor:
        cursor.execute(query_text(statement), params)
        row = cursor.fetchone()
    if row is None:
        raise RuntimeError("a statement that always returns one row returned none")
    return tuple(row)


def prepared_row(statement: sql.Composed, params: dict[str, Any]) -> tuple[Any, ...]:
    """Run one of a write's statements (the turn count, the upsert) and return its one row, as a prepared
    statement when ``PREPARED_STATEMENTS`` is on: parsed once per connection, then run by name, and once
    PostgreSQL settles on the generic plan, not planned again.

    Why a psycopg cursor of its own and not Django's ``connection.cursor()``: Django's cursor binds values on
    the client and cannot prepare. Measured (session 10, 2,000 ``memory_upsert`` calls through the service,
    same data, alternating): 0.96 ms a write prepared against 1.44 ms on Django's cursor; bench/RESULTS.md
    (session 4): PostgreSQL CPU per upsert 1,035 against 1,790 us. The cost: Django neither logs these
    two statements (``connection.queries``) nor turns their errors into ``django.db`` errors. Only
    statements whose plan does not depend on the values belong here (not the per-user search)."""
    if not settings.PREPARED_STATEMENTS:
        return fetch_one(statement, params)
    connection.ensure_connection()
    with psycopg.Cursor(connection.connection) as cursor:
        cursor.execute(query_text(statement), params, prepare=True)
        row = cursor.fetchone()
    if row is None:
        raise RuntimeError("a statement that always returns one row returned none")
    return tuple(row)


@cache
def _timestamptz_loader() -> tuple[int, Any]:
    """psycopg's own text loader of ``timestamptz`` (C, with psycopg's binary package). Django's connection
    registers a Python one: about 3 us a value, 0.9 ms of a 50-row recall (three timestamps a row), measured
    with cProfile. Both give aware datetimes in the session's time zone, which Django sets to UTC."""
    oid = psycopg.postgres.types["timestamptz"].oid
    return oid, psycopg.adapters.get_loader(oid, psycopg.pq.Format.TEXT)


# --- The recall lock -----------------------------------------------------------------------------------

_RECALL_LOCK = sql.SQL("SELECT pg_advisory_xact_lock(%(recall_lock)s, hashtext(%(user)s)); ")


def rows_under_recall_lock(statement: sql.Composable, params: dict[str, Any]) -> list[tuple[Any, ...]]:
    """The rows of one recall statement (whose ``%(user)s`` names the user), run right after the user's
    recall lock in the same query string: one round trip, one transaction, the recall statement's snapshot
    taken once the lock is held (why: :func:`usermemory.sql.recall.recall`). Shared by the recall and the
    ranked recall, so both queue on the same lock. Timestamps are read by psycopg's own loader
    (:func:`_timestamptz_loader`), registered on this cursor only."""
    params = {**params, "recall_lock": LockId.USER_RECALL}
    with connection.cursor() as cursor:
        cursor.adapters.register_loader(*_timestamptz_loader())
        cursor.execute(query_text(_RECALL_LOCK) + query_text(statement), params)
        cursor.nextset()  # the lock statement's row, then the recall's
        return cursor.fetchall()
