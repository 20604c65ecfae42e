"""Hand-written SQL of user memory: the statements ``bench/`` shows the ORM is too slow for (recall, search,
upsert with its event, the turn count) and the visibility test of history events.

One function per statement, keyword-only arguments, ``%(name)s`` placeholders filled from a dict built in the
function that runs the statement, and typed results. Only table and column names, taken from the models, are
written into the SQL; every value is a parameter. Nothing else in usermemory calls ``cursor()``.
"""

import json
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any

import psycopg
from django.conf import settings
from django.db import connection

from apikeys.models import AgentGroup
from memoryplatform.locks import LockId
from usermemory.models import (
    EntryEmbedding,
    MemoryEntry,
    MemoryEntryGroup,
    MemoryEvent,
    RecallOrder,
    TurnWriteCount,
)
from usermemory.searchtext import search_columns

ENTRY_TABLE = MemoryEntry._meta.db_table
GROUP_TABLE = MemoryEntryGroup._meta.db_table
EVENT_TABLE = MemoryEvent._meta.db_table
TURN_TABLE = TurnWriteCount._meta.db_table
EMBEDDING_TABLE = EntryEmbedding._meta.db_table
# The search columns, which no reader of an entry needs: recall and search leave them deferred.
SEARCH_ONLY = frozenset({"value_text", "key_folded", "text_folded"})
ENTRY_FIELDS = tuple(f for f in MemoryEntry._meta.concrete_fields if f.name not in SEARCH_ONLY)
ENTRY_ATTNAMES = tuple(f.attname for f in ENTRY_FIELDS)
# (position, field) of the columns whose database value Django converts (JSON text -> Python).
_CONVERTED = tuple((i, f) for i, f in enumerate(ENTRY_FIELDS) if hasattr(f, "from_db_value"))
EVENT_FIELDS = tuple(MemoryEvent._meta.concrete_fields)
EVENT_ATTNAMES = tuple(f.attname for f in EVENT_FIELDS)
_EVENT_CONVERTED = tuple((i, f) for i, f in enumerate(EVENT_FIELDS) if hasattr(f, "from_db_value"))

# Groups of a read: a list of group ids, or ``None`` for every group the agent is a member of (read by a
# subquery of the same statement, so it costs no round trip).
Groups = list[str] | None


def _members() -> tuple[str, str, str]:
    through = AgentGroup.members.through._meta
    return through.db_table, through.get_field("agentgroup").column, through.get_field("agent").column


@cache
def _agent_groups_sql(*, all_of_agent: bool) -> str:
    """The read's groups as SQL: ``%(groups)s`` (an array), or the agent's memberships (``%(agent)s``)."""
    if not all_of_agent:
        return "SELECT unnest(%(groups)s::text[])"
    members, group_column, agent_column = _members()
    return f"SELECT {group_column} FROM {members} WHERE {agent_column} = %(agent)s"


# Valid now: not superseded by a Dream summary, and no ``valid_to`` or one still ahead; ``%(all_times)s``
# (``?includeSuperseded=true``) lifts it. The ORM's form of the same test: usermemory.selectors.current_q.
CURRENT_WHERE = "(%(all_times)s OR (superseded_by_id IS NULL AND (valid_to IS NULL OR valid_to > now())))"


@cache
def visible_where(*, all_of_agent: bool) -> str:
    """Visible(user, agent, groups) over the entry columns in scope: ``%(user)s``, ``%(agent)s`` and the
    groups (:func:`_agent_groups_sql`), of the entries valid now (:data:`CURRENT_WHERE`)."""
    groups = _agent_groups_sql(all_of_agent=all_of_agent)
    return (
        f"user_id = %(user)s AND (visibility = 'global' OR "
        f"(visibility = 'self' AND source_agent_id = %(agent)s) OR "
        f"(visibility = 'group' AND id IN (SELECT entry_id FROM {GROUP_TABLE} WHERE user_id = %(user)s "
        f"AND group_id IN ({groups})))) AND {CURRENT_WHERE}"
    )


@cache
def readable_where(*, agent_view: bool, all_of_agent: bool) -> str:
    """The user's entries a read returns: an agent's, the visible ones (:func:`visible_where`); a viewer's
    or an admin's, all of them; valid now either way (:data:`CURRENT_WHERE`)."""
    if agent_view:
        return visible_where(all_of_agent=all_of_agent)
    return f"user_id = %(user)s AND {CURRENT_WHERE}"


def scope_params(
    *,
    user_id: str,
    agent_id: str | None,
    group_ids: Groups,
    include_superseded: bool = False,
    min_confidence: float | None = None,
) -> dict[str, Any]:
    return {
        "user": user_id,
        "agent": agent_id,
        "groups": group_ids or [],
        "all_times": include_superseded,
        "min_confidence": min_confidence,
    }


# ``minConfidence``: only entries at least this sure (none without a confidence); NULL keeps every entry.
MIN_CONFIDENCE_WHERE = " AND (%(min_confidence)s::float8 IS NULL OR confidence >= %(min_confidence)s::float8)"


@cache
def entry_columns(*, agent_view: bool, all_of_agent: bool) -> str:
    """The entry columns recall and search return. In an agent's read (``agent_view``) ``conflicted`` is what
    that agent may see: a stored flag holds only while another entry of the set that the agent sees has
    another value, so the flag never reveals a value the agent cannot see."""
    columns = [f.column for f in ENTRY_FIELDS]
    if not agent_view:
        return ", ".join(f"{ENTRY_TABLE}.{c}" for c in columns)
    conflict = (
        f"CASE WHEN {ENTRY_TABLE}.conflicted THEN EXISTS (SELECT 1 FROM {ENTRY_TABLE} AS other "
        f"WHERE (other.key = {ENTRY_TABLE}.key OR other.id = ANY({ENTRY_TABLE}.meaning_conflicts)) "
        f"AND other.value_text <> {ENTRY_TABLE}.value_text "
        f"AND {visible_where(all_of_agent=all_of_agent)}) ELSE false END"
    )
    return ", ".join(conflict if c == "conflicted" else f"{ENTRY_TABLE}.{c}" for c in columns)


def entries_of_rows(rows: Sequence[Sequence[Any]]) -> list[MemoryEntry]:
    """Entries from rows of :func:`entry_columns`, as Django loads them: each field's ``from_db_value``
    converts its column, and ``Model.from_db`` builds the instance (the search columns stay deferred)."""
    built = []
    alias = connection.alias
    for row in rows:
        values = list(row)
        for index, model_field in _CONVERTED:
            values[index] = model_field.from_db_value(values[index], None, connection)
        built.append(MemoryEntry.from_db(alias, ENTRY_ATTNAMES, values))
    return built


@contextmanager
def _psycopg_cursor(
    cursor_class: type[psycopg.Cursor[Any]], sql: str, params: dict[str, Any]
) -> Iterator[Any]:
    """A psycopg cursor of ``cursor_class`` on the connection Django opened (``connection.connection``), in
    Django's transaction, with Django's error translation (``wrap_database_errors``); the statement is logged
    with its values in ``connection.queries_log``, as Django's cursor logs one.

    For what Django's cursor cannot ask for, through psycopg's public API: a prepared statement
    (:func:`_prepared_row`) and psycopg's own (C) timestamp loader (:func:`recall`)."""
    connection.ensure_connection()
    start = time.monotonic()
    with connection.wrap_database_errors, cursor_class(connection.connection) as cursor:
        yield cursor
    if connection.queries_logged:
        composed = psycopg.ClientCursor(connection.connection).mogrify(sql, params)
        connection.queries_log.append({"sql": composed, "time": f"{time.monotonic() - start:.3f}"})


def _prepared_row(sql: str, params: dict[str, Any]) -> Any:
    """Run one of a write's statements and return its one row, as a prepared statement when
    ``PREPARED_STATEMENTS`` is on: parsed once per connection, then run by name, and once PostgreSQL settles
    on the generic plan, not planned again. Django's cursor binds on the client and cannot prepare.
    Measured on the upsert statement: 1.0-1.3 ms on Django's cursor, 0.56-0.59 ms prepared. Only statements
    whose plan does not depend on the values belong here (not the per-user search)."""
    if not settings.PREPARED_STATEMENTS:
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            return cursor.fetchone()
    with _psycopg_cursor(psycopg.Cursor, sql, params) as cursor:
        cursor.execute(sql, params, prepare=True)
        return cursor.fetchone()


@cache
def _timestamptz_loader() -> tuple[int, Any]:
    """psycopg's own text loader of ``timestamptz`` (C, with psycopg's binary package). Django's connection
    registers a Python one: about 3 us a value, 0.9 ms of a 50-row recall (three timestamps a row), measured
    with cProfile. Both give aware datetimes in the session's time zone, which Django sets to UTC."""
    oid = psycopg.postgres.types["timestamptz"].oid
    return oid, psycopg.adapters.get_loader(oid, psycopg.pq.Format.TEXT)


# --- Recall -------------------------------------------------------------------------------------------


_RECALL_LOCK = "SELECT pg_advisory_xact_lock(%(namespace)s, hashtext(%(user)s))"


@cache
def _recall_sql(*, order: str, all_of_agent: bool, agent_view: bool) -> str:
    where = visible_where(all_of_agent=all_of_agent) + MIN_CONFIDENCE_WHERE
    recent = "ORDER BY updated_at DESC, id DESC"
    picks = f"WITH head AS (SELECT id FROM {ENTRY_TABLE} WHERE {where} {recent} LIMIT %(head)s)"
    chosen = "SELECT id FROM head"
    if order == RecallOrder.MOST_ACCESSED:
        picks += (
            f", rest AS (SELECT id FROM {ENTRY_TABLE} WHERE {where} AND id NOT IN (SELECT id FROM head) "
            f"ORDER BY access_count DESC, updated_at DESC, id DESC LIMIT %(rest)s)"
        )
        chosen += " UNION ALL SELECT id FROM rest"
    return (
        f"{picks} UPDATE {ENTRY_TABLE} SET {access_marks(order=order)} WHERE id IN ({chosen}) "
        f"RETURNING {entry_columns(agent_view=agent_view, all_of_agent=all_of_agent)}"
    )


def access_marks(*, order: str) -> str:
    """The SET list of a recall's UPDATE: ``last_accessed_at`` moves to ``%(now)s`` where older than
    ``%(threshold)s``; only ``most_accessed`` counts an access (EDDI: ``most_recent`` has no side effect on
    ``access_count``)."""
    count = "access_count = access_count + 1, " if order == RecallOrder.MOST_ACCESSED else ""
    return (
        f"{count}last_accessed_at = CASE WHEN last_accessed_at IS NULL OR last_accessed_at < %(threshold)s "
        f"THEN %(now)s ELSE last_accessed_at END"
    )


def recall(
    *,
    user_id: str,
    agent_id: str,
    group_ids: Groups,
    order: str,
    head: int,
    rest: int,
    threshold: datetime,
    now: datetime,
    agent_view: bool,
    min_confidence: float | None = None,
) -> list[MemoryEntry]:
    """Pick the entries to recall (the newest ``head``, then for ``most_accessed`` the ``rest`` most accessed
    of the others), mark their access and return them, unordered.

    Every recall sets ``last_accessed_at`` where it is older than ``threshold``; only ``most_accessed`` counts
    one access of each entry in ``access_count`` (EDDI: ``most_recent`` has no side effect on it).

    The user's recall lock is taken first, in a statement of its own: concurrent recalls of one user queue
    there, and each then runs the recall statement with a snapshot taken after the previous one committed
    (READ COMMITTED takes one per statement), so it reads the rows as they now are. Taken inside the recall
    statement, the lock came after the statement's snapshot: each waiter then read the row versions the
    previous recall had replaced, waited on their row locks and re-checked every row (EvalPlanQual), and 4
    clients did 4-5 recalls a second on the heaviest user against 70-90 for one.

    Both statements go in one query string, one round trip: PostgreSQL runs a multi-statement query in one
    transaction (the caller's, if any, else an implicit one that holds the lock to its end), each statement
    with its own snapshot. (A client-binding cursor allows several statements; a BEGIN, the lock, the recall
    and a COMMIT as four round trips cost about 0.5 ms more a recall.)
    """
    params: dict[str, Any] = {
        **scope_params(
            user_id=user_id, agent_id=agent_id, group_ids=group_ids, min_confidence=min_confidence
        ),
        "head": head,
        "rest": rest,
        "threshold": threshold,
        "now": now,
    }
    sql = _recall_sql(order=order, all_of_agent=group_ids is None, agent_view=agent_view)
    return entries_of_rows(rows_under_recall_lock(sql, params))


def rows_under_recall_lock(sql: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
    """The rows of one recall statement (``sql``, whose ``%(user)s`` names the user), run right after the
    user's recall lock in the same query string: one round trip, one transaction, the recall statement's
    snapshot taken once the lock is held (why: :func:`recall`). Shared by :func:`recall` and the ranked
    recall (:func:`usermemory.search_store.ranked_recall`), so both queue on the same lock."""
    params = {**params, "namespace": LockId.USER_RECALL}
    query = f"{_RECALL_LOCK}; {sql}"
    with _psycopg_cursor(psycopg.ClientCursor, query, params) as cursor:
        cursor.adapters.register_loader(*_timestamptz_loader())
        cursor.execute(query, params)
        cursor.nextset()  # the lock statement's row, then the recall's
        return cursor.fetchall()


# --- Search -------------------------------------------------------------------------------------------


@cache
def _search_sql(*, agent_view: bool, all_of_agent: bool, category: bool) -> str:
    where = readable_where(agent_view=agent_view, all_of_agent=all_of_agent)
    where += MIN_CONFIDENCE_WHERE
    # A literal substring of the casefolded key or value (strpos: no pattern characters), over the user's own
    # rows (memory_user_recent_idx); a trigram index cost every write more than it saved a user's search.
    where += " AND (strpos(key_folded, %(folded)s) > 0 OR strpos(text_folded, %(folded)s) > 0)"
    if category:
        where += " AND category = %(category)s"
    return (
        f"SELECT {entry_columns(agent_view=agent_view, all_of_agent=all_of_agent)} FROM {ENTRY_TABLE} "
        f"WHERE {where} ORDER BY updated_at DESC, id DESC LIMIT %(limit)s OFFSET %(offset)s"
    )


def search(
    *,
    user_id: str,
    agent_id: str | None,
    group_ids: Groups,
    agent_view: bool,
    query: str,
    category: str | None,
    limit: int,
    offset: int,
    include_superseded: bool = False,
    min_confidence: float | None = None,
) -> list[MemoryEntry]:
    """One page of the user's entries (an agent's read: the visible ones; valid now unless
    ``include_superseded``) whose key or value text holds ``query`` as a literal substring, ignoring case
    (full Unicode case folding: ``str.casefold``), newest first."""
    params: dict[str, Any] = {
        **scope_params(
            user_id=user_id,
            agent_id=agent_id,
            group_ids=group_ids,
            include_superseded=include_superseded,
            min_confidence=min_confidence,
        ),
        "folded": query.casefold(),
        "category": category,
        "limit": limit,
        "offset": offset,
    }
    sql = _search_sql(agent_view=agent_view, all_of_agent=group_ids is None, category=bool(category))
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return entries_of_rows(cursor.fetchall())


# --- History ------------------------------------------------------------------------------------------


@cache
def _event_seen(*, old: bool) -> str:
    """Whether the agent (``%(agent)s``) could see an event's old value (``old``) or new value: the scope the
    event recorded (owner, visibility and groups when it was written) meets the agent as Visible meets an
    entry: global, ``self`` owned by the agent, or ``group`` sharing a group the agent is a member of."""
    members, group_column, agent_column = _members()
    prefix = "old_" if old else ""
    visibility, groups = f"{prefix}visibility", f"{prefix}group_ids"
    return (
        f"({visibility} = 'global' OR ({visibility} = 'self' AND owner = %(agent)s) OR "
        f"({visibility} = 'group' AND EXISTS (SELECT 1 FROM jsonb_array_elements_text({groups}) AS g(value) "
        f"WHERE g.value IN (SELECT {group_column} FROM {members} WHERE {agent_column} = %(agent)s))))"
    )


@dataclass(frozen=True)
class SeenEvent:
    """A history event as an agent may see it: a value it could not see when the event was written is
    ``None`` in ``event``, and flagged hidden."""

    event: MemoryEvent
    old_value_hidden: bool
    new_value_hidden: bool


def events_seen_by_agent(
    *, entry_id: int, agent_id: str, skip_actions: Sequence[str], limit: int
) -> list[SeenEvent]:
    """The first ``limit`` events of an entry (oldest first, none of ``skip_actions``) in which the agent
    could see the old value or the new value."""
    seen_old, seen_new = _event_seen(old=True), _event_seen(old=False)
    columns = ", ".join(str(f.column) for f in EVENT_FIELDS)
    sql = (
        f"SELECT {columns}, NOT {seen_old}, NOT {seen_new} FROM {EVENT_TABLE} "
        f"WHERE entry_id = %(entry)s AND NOT (action = ANY(%(skip)s)) AND ({seen_old} OR {seen_new}) "
        f"ORDER BY created_at, id LIMIT %(limit)s"
    )
    params: dict[str, Any] = {
        "entry": entry_id,
        "agent": agent_id,
        "skip": list(skip_actions),
        "limit": limit,
    }
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    seen = []
    for *values, old_hidden, new_hidden in rows:
        for index, model_field in _EVENT_CONVERTED:
            values[index] = model_field.from_db_value(values[index], None, connection)
        event = MemoryEvent.from_db(connection.alias, EVENT_ATTNAMES, values)
        if old_hidden:
            event.old_value = None
        if new_hidden:
            event.new_value = None
        seen.append(SeenEvent(event, old_hidden, new_hidden))
    return seen


# --- As of a past time ---------------------------------------------------------------------------------

# The actions after which an entry still held a value (its last event's ``new_value``); after any other
# (deleted, evicted, pruned, superseded) it was gone from reads.
LIVE_ACTIONS = (
    MemoryEvent.Action.CREATED,
    MemoryEvent.Action.UPDATED,
    MemoryEvent.Action.FLAGGED,
    MemoryEvent.Action.UNFLAGGED,
    MemoryEvent.Action.RESOLVED,
)
WRITE_ACTIONS = (MemoryEvent.Action.CREATED, MemoryEvent.Action.UPDATED)


@dataclass(frozen=True)
class PastEntry:
    """An entry as history knew it at a past time: its value and scope then, when it was created and when
    its value was last written (``updated_at``; ``None`` if history holds no write of it)."""

    entry_id: int
    key: str
    value: Any
    visibility: str
    owner: str | None
    group_ids: list[str]
    created_at: datetime
    updated_at: datetime | None
    category: str


def entries_as_of(
    *, user_id: str, agent_id: str | None, as_of: datetime, limit: int, offset: int
) -> list[PastEntry]:
    """One page of the user's entries as history knew them at ``as_of``, newest write first: each entry
    whose last event by then left it holding a value (:data:`LIVE_ACTIONS`), with that value. For an agent
    (``agent_id``), only the values it could see when they were written (the scope the event recorded met
    by the agent's groups now, as in :func:`events_seen_by_agent`). The category is the entry's current one
    (history does not record it), "" for an entry gone since."""
    seen = f"AND {_event_seen(old=False)}" if agent_id is not None else ""
    sql = (
        f"WITH past AS (SELECT * FROM {EVENT_TABLE} WHERE user_id = %(user)s AND entry_id IS NOT NULL "
        f"AND created_at <= %(as_of)s), "
        f"last AS (SELECT DISTINCT ON (entry_id) * FROM past ORDER BY entry_id, created_at DESC, id DESC), "
        f"written AS (SELECT entry_id, min(created_at) AS created, "
        f"max(created_at) FILTER (WHERE action = ANY(%(writes)s)) AS updated FROM past GROUP BY entry_id), "
        f"live AS (SELECT * FROM last WHERE action = ANY(%(live)s) {seen}) "
        f"SELECT live.entry_id, live.key, live.new_value, live.visibility, NULLIF(live.owner, ''), "
        f"live.group_ids, written.created, written.updated, COALESCE(e.category, '') "
        f"FROM live JOIN written ON written.entry_id = live.entry_id "
        f"LEFT JOIN {ENTRY_TABLE} e ON e.id = live.entry_id "
        f"ORDER BY written.updated DESC NULLS LAST, live.entry_id DESC LIMIT %(limit)s OFFSET %(offset)s"
    )
    params: dict[str, Any] = {
        "user": user_id,
        "agent": agent_id,
        "as_of": as_of,
        "writes": list(WRITE_ACTIONS),
        "live": list(LIVE_ACTIONS),
        "limit": limit,
        "offset": offset,
    }
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    return [
        PastEntry(
            entry_id,
            key,
            json.loads(value) if isinstance(value, str) else value,
            visibility,
            owner,
            json.loads(groups) if isinstance(groups, str) else groups,
            created,
            updated,
            category,
        )
        for entry_id, key, value, visibility, owner, groups, created, updated, category in rows
    ]


# --- Writes -------------------------------------------------------------------------------------------


def turn_count(*, agent_id: str, user_id: str, turn_id: str, now: datetime, cutoff: datetime) -> int:
    """Count one write in the agent's turn and return the turn's count: ``INSERT .. ON CONFLICT DO UPDATE``,
    so concurrent writes count exactly. A window older than ``cutoff`` starts again at 1. The same statement
    first takes the user's advisory lock, which every upsert holds."""
    sql = (
        f"INSERT INTO {TURN_TABLE} (agent_id, user_id, turn_id, window_start, count) "
        f"SELECT %(agent)s, %(user)s, %(turn)s, %(now)s, 1 "
        f"FROM (SELECT pg_advisory_xact_lock(%(namespace)s, hashtext(%(user)s))) AS user_lock "
        f"ON CONFLICT (agent_id, user_id, turn_id) DO UPDATE SET "
        f"count = CASE WHEN {TURN_TABLE}.window_start < %(cutoff)s THEN 1 ELSE {TURN_TABLE}.count + 1 END, "
        f"window_start = CASE WHEN {TURN_TABLE}.window_start < %(cutoff)s THEN excluded.window_start "
        f"ELSE {TURN_TABLE}.window_start END RETURNING count"
    )
    params: dict[str, Any] = {
        "agent": agent_id,
        "user": user_id,
        "turn": turn_id,
        "now": now,
        "cutoff": cutoff,
        "namespace": LockId.USER_MEMORY,
    }
    return int(_prepared_row(sql, params)[0])


@dataclass(frozen=True)
class Stored:
    """The stored columns of the entry an upsert wrote."""

    entry_id: int
    created_at: datetime
    access_count: int
    last_accessed_at: datetime | None
    owner: str | None
    category: str


@dataclass(frozen=True)
class Upserted:
    """What one upsert statement did. ``stored is None``: the cap stopped a new entry (``count`` is the
    user's number of entries then). ``old_groups is None``: there was no entry on the key."""

    old_groups: list[str] | None
    count: int
    stored: Stored | None


@cache
def _upsert_sql(*, is_global: bool) -> str:
    if is_global:
        key = "user_id = %(user)s AND key = %(key)s AND visibility = 'global'"
        target = "(user_id, key) WHERE visibility = 'global'"
        visibility_update = ""  # a global entry stays global, and keeps its owner
    else:
        key = (
            "user_id = %(user)s AND key = %(key)s AND NOT (visibility = 'global') "
            "AND source_agent_id = %(owner)s"
        )
        target = "(user_id, key, source_agent_id) WHERE NOT (visibility = 'global')"
        visibility_update = ", visibility = excluded.visibility"
    event_columns = (
        "entry_id, user_id, key, action, actor_type, actor_id, key_prefix, old_value, new_value, owner, "
        "old_visibility, old_group_ids, visibility, group_ids, created_at"
    )
    return (
        f"WITH old AS (SELECT id, value, category, group_ids, visibility FROM {ENTRY_TABLE} WHERE {key}), "
        f"room AS (SELECT count(*) AS n FROM {ENTRY_TABLE} "
        f"WHERE user_id = %(user)s AND NOT EXISTS (SELECT 1 FROM old)), "
        f"up AS (INSERT INTO {ENTRY_TABLE} (user_id, key, value, value_text, key_folded, text_folded, "
        f"category, visibility, "
        f"source_agent_id, group_ids, source_conversation_id, conflicted, access_count, created_at, "
        f"updated_at, last_accessed_at, valid_from, valid_to, confidence, source) "
        f"SELECT %(user)s, %(key)s, %(value)s::jsonb, %(text)s, %(key_folded)s, %(text_folded)s, "
        f"COALESCE(%(category)s, (SELECT category FROM old), %(new_category)s), %(visibility)s, %(owner)s, "
        f"%(groups)s::jsonb, %(conversation)s, false, 0, %(now)s, %(now)s, NULL, %(now)s, %(valid_to)s, "
        f"%(confidence)s::float8, %(source)s::varchar "
        f"WHERE EXISTS (SELECT 1 FROM old) OR (SELECT n FROM room) < %(cap)s "
        f"ON CONFLICT {target} DO UPDATE SET value = excluded.value, value_text = excluded.value_text, "
        f"text_folded = excluded.text_folded, "
        f"category = excluded.category, group_ids = excluded.group_ids, "
        f"source_conversation_id = excluded.source_conversation_id, conflicted = excluded.conflicted, "
        f"updated_at = excluded.updated_at, valid_from = excluded.valid_from, valid_to = excluded.valid_to, "
        f"superseded_by_id = NULL, confidence = excluded.confidence, "
        f"source = excluded.source{visibility_update} "
        f"RETURNING id, created_at, access_count, last_accessed_at, source_agent_id, category), "
        f"event AS (INSERT INTO {EVENT_TABLE} ({event_columns}) SELECT up.id, %(user)s, %(key)s, "
        f"CASE WHEN EXISTS (SELECT 1 FROM old) THEN %(updated)s ELSE %(created)s END, %(actor_type)s, "
        f"%(actor_id)s, %(key_prefix)s, (SELECT value FROM old), %(value)s::jsonb, "
        f"COALESCE(up.source_agent_id, ''), COALESCE((SELECT visibility FROM old), %(visibility)s), "
        f"COALESCE((SELECT group_ids FROM old), %(groups)s::jsonb), %(visibility)s, %(groups)s::jsonb, "
        f"%(now)s FROM up) "
        f"SELECT (SELECT group_ids FROM old), (SELECT n FROM room), up.id, up.created_at, up.access_count, "
        f"up.last_accessed_at, up.source_agent_id, up.category "
        f"FROM (SELECT 1 AS one) AS o LEFT JOIN up ON true"
    )


def upsert_with_event(
    *,
    user_id: str,
    key: str,
    value: Any,
    text: str,
    category: str | None,
    new_category: str,
    visibility: str,
    owner: str | None,
    group_ids: list[str],
    conversation_id: str | None,
    cap: int,
    actor_type: str,
    actor_id: str,
    key_prefix: str,
    now: datetime,
    valid_to: datetime | None = None,
    confidence: float | None = None,
    source: str | None = None,
) -> Upserted:
    """The whole write of one entry in one statement, run while the user's lock is held: read the entry on
    the upsert key, count the user's entries when there is none, insert or update only if the entry exists or
    the count is under ``cap``, and write the history event of what it did (who could see the old value: the
    stored entry's visibility and groups, else the new ones; its owner is the stored entry's).

    ``category=None`` keeps the stored category, ``new_category`` on insert (legacy properties). The value
    is valid from ``now`` to ``valid_to`` (``None``: open); a write on a superseded entry makes it current
    again, with the new value. ``confidence`` and ``source`` are set by every write (``None``: unsaid)."""
    value_json, groups_json = json.dumps(value), json.dumps(group_ids)
    columns = search_columns(key=key, text=text)
    params: dict[str, Any] = {
        "user": user_id,
        "key": key,
        "owner": owner,
        "value": value_json,
        "text": text,
        "key_folded": columns.key_folded,  # the search columns, written with the key and value_text
        "text_folded": columns.text_folded,
        "category": category,
        "new_category": new_category,
        "visibility": visibility,
        "groups": groups_json,
        "conversation": conversation_id,
        "confidence": confidence,
        "source": source,
        "now": now,
        "valid_to": valid_to,
        "cap": cap,
        "updated": MemoryEvent.Action.UPDATED,
        "created": MemoryEvent.Action.CREATED,
        "actor_type": actor_type,
        "actor_id": actor_id,
        "key_prefix": key_prefix,
    }
    old_groups, count, *stored = _prepared_row(_upsert_sql(is_global=visibility == "global"), params)
    if isinstance(old_groups, str):  # Django's connection reads jsonb as text; JSONField parses it
        old_groups = json.loads(old_groups)
    return Upserted(old_groups, count or 0, None if stored[0] is None else Stored(*stored))


# --- Entry vectors -----------------------------------------------------------------------------------
# The text an entry's vector is computed from (usermemory.embedding.embedding_text) and its SHA-256, in SQL,
# so that "missing or stale" is one set-based statement.
_EMBEDDED_TEXT = "e.key || ': ' || e.value_text"
_EMBEDDED_HASH = f"encode(sha256(convert_to({_EMBEDDED_TEXT}, 'UTF8')), 'hex')"
_PENDING_WHERE = (
    f"e.id > %(after)s AND (%(ids)s::bigint[] IS NULL OR e.id = ANY(%(ids)s)) "
    f"AND (v.entry_id IS NULL OR v.model <> %(model)s OR v.text_hash <> {_EMBEDDED_HASH})"
)


@dataclass(frozen=True)
class PendingText:
    entry_id: int
    text: str


def embeddings_pending(
    *, model: str, entry_ids: list[int] | None, after_id: int, limit: int
) -> list[PendingText]:
    """Entries (of ``entry_ids``, or all) after ``after_id`` whose vector is missing, of another model, or of
    another text, in id order, with the text to embed."""
    params = {"model": model, "ids": entry_ids, "after": after_id, "limit": limit}
    sql = (
        f"SELECT e.id, {_EMBEDDED_TEXT} FROM {ENTRY_TABLE} e "
        f"LEFT JOIN {EMBEDDING_TABLE} v ON v.entry_id = e.id "
        f"WHERE {_PENDING_WHERE} ORDER BY e.id LIMIT %(limit)s"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [PendingText(entry_id, text) for entry_id, text in cursor.fetchall()]


def embeddings_pending_count(*, model: str) -> int:
    """How many entries :func:`embeddings_pending` would return in all."""
    params = {"model": model, "ids": None, "after": 0}
    sql = (
        f"SELECT count(*) FROM {ENTRY_TABLE} e LEFT JOIN {EMBEDDING_TABLE} v ON v.entry_id = e.id "
        f"WHERE {_PENDING_WHERE}"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return int(cursor.fetchone()[0])


def embeddings_write(
    *,
    model: str,
    dimensions: int,
    entry_ids: list[int],
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
        "ids": entry_ids,
        "hashes": text_hashes,
        "vectors": vectors,
        "now": now,
    }
    sql = (
        f"INSERT INTO {EMBEDDING_TABLE} AS v "
        f"(entry_id, model, dimensions, text_hash, embedding, embedded_at) "
        f"SELECT n.id, %(model)s, %(dimensions)s, n.text_hash, n.vector::vector, %(now)s "
        f"FROM unnest(%(ids)s::bigint[], %(hashes)s::text[], %(vectors)s::text[]) "
        f"AS n(id, text_hash, vector) "
        f"JOIN {ENTRY_TABLE} e ON e.id = n.id AND {_EMBEDDED_HASH} = n.text_hash "
        f"ON CONFLICT (entry_id) DO UPDATE SET model = EXCLUDED.model, dimensions = EXCLUDED.dimensions, "
        f"text_hash = EXCLUDED.text_hash, embedding = EXCLUDED.embedding, embedded_at = EXCLUDED.embedded_at "
        f"WHERE (v.model, v.text_hash) IS DISTINCT FROM (EXCLUDED.model, EXCLUDED.text_hash)"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount
