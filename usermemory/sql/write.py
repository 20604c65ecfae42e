"""Writes: the turn count, and the upsert of one entry with its history event, each one statement run while
the user's lock is held (prepared: :func:`usermemory.sql.base.prepared_row`); and Dream's batch writes, the
history events of a batch and the deletion of a batch, on Django's ``connection.cursor()``. A batch's ids
travel as one array parameter (``= ANY(%(ids)s)``)."""

import json
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any, Literal

from django.db import connection
from psycopg import sql

from memoryplatform.locks import LockId
from usermemory.models import MemoryEvent
from usermemory.searchtext import search_columns
from usermemory.sql.base import ENTRY, ENTRY_GROUP, EVENT, TURN, prepared_row

# Counts %(writes)s writes. The same statement first takes the user's advisory lock, which every upsert holds.
# A window older than %(cutoff)s starts again from 0.
_TURN_COUNT = sql.SQL(
    """INSERT INTO {turn} (agent_id, user_id, turn_id, window_start, count)
    SELECT %(agent)s, %(user)s, %(turn)s, %(now)s, %(writes)s
    FROM (SELECT pg_advisory_xact_lock(%(namespace)s, hashtext(%(user)s))) AS user_lock
    ON CONFLICT (agent_id, user_id, turn_id) DO UPDATE SET
        count = CASE WHEN {turn}.window_start < %(cutoff)s THEN %(writes)s ELSE {turn}.count + %(writes)s END,
        window_start = CASE WHEN {turn}.window_start < %(cutoff)s THEN excluded.window_start
            ELSE {turn}.window_start END
    RETURNING count"""
).format(turn=TURN)


def turn_count(
    *, agent_id: str, user_id: str, turn_id: str, now: datetime, cutoff: datetime, writes: int = 1
) -> int:
    """Count ``writes`` writes in the agent's turn and return the turn's count: ``INSERT .. ON CONFLICT DO
    UPDATE``, so concurrent writes count exactly. A window older than ``cutoff`` starts again from 0. The
    same statement first takes the user's advisory lock, which every upsert holds."""
    params: dict[str, Any] = {
        "writes": writes,
        "agent": agent_id,
        "user": user_id,
        "turn": turn_id,
        "now": now,
        "cutoff": cutoff,
        "namespace": LockId.USER_MEMORY,
    }
    return int(prepared_row(_TURN_COUNT, params)[0])


# --- Upsert with its event -----------------------------------------------------------------------------


@dataclass(frozen=True)
class EntryWrite:
    """One upsert as the statement takes it. ``category=None`` keeps the stored category, ``new_category`` on
    insert (legacy properties). The value is valid from ``now`` to ``valid_to`` (``None``: open; a TTL
    sets ``ttl_seconds`` too); ``confidence`` and ``source`` are set by every write (``None``: unsaid).
    ``observed_at``: the time of what the value says (``None``: ``now``); the stored value stays when it was
    observed later. ``cap``: the user's most entries; the actor and ``key_prefix`` go to the event."""

    user_id: str
    key: str
    value: Any
    text: str
    category: str | None
    new_category: str
    visibility: str
    owner: str | None
    group_ids: list[str]
    conversation_id: str | None
    cap: int
    actor_type: str
    actor_id: str
    key_prefix: str
    now: datetime
    valid_to: datetime | None = None
    ttl_seconds: int | None = None  # set with valid_to by a TTL, so a refresh moves valid_to by as much
    confidence: float | None = None
    source: str | None = None
    provenance: dict[str, Any] | None = None  # the event's: where the new value came from
    observed_at: datetime | None = None


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
class Kept:
    """The entry on the upsert key, left as it was: its value was observed after the write's."""

    entry_id: int
    observed_at: datetime


@dataclass(frozen=True)
class Upserted:
    """What one upsert statement did. ``kept``: nothing was written, the stored value is newer. Else
    ``stored is None``: the cap stopped a new entry (``count`` is the owner's number of entries of the user
    then: those with no owner when it has none).
    ``old_groups is None``: there was no entry on the key."""

    old_groups: list[str] | None
    count: int
    stored: Stored | None
    kept: Kept | None = None


# old: the entry on the upsert key ({on_key}); room: the owner's number of entries of the user when there is
# none (the cap counts nothing the writer cannot see, so a refusal or an eviction tells it nothing); up: the
# insert or update, only if the entry exists or there is room under %(cap)s ({conflict}: the upsert key's
# unique index; {set_visibility}: a global entry stays global and keeps its owner; time order: the update only
# when the stored value was observed no later than this one, decided on the row the conflict locked, so
# nothing comes back when it was observed later); event: what it did, and who could see the old value (the
# stored entry's visibility and groups, else the new ones).
_UPSERT = """WITH old AS (
    SELECT id, value, category, group_ids, visibility, observed_at FROM {entry} WHERE {on_key}
), room AS (
    SELECT count(*) AS n FROM {entry}
    WHERE user_id = %(user)s AND {owned_by} AND NOT EXISTS (SELECT 1 FROM old)
), up AS (
    INSERT INTO {entry} (
        user_id, key, value, value_text, key_folded, text_folded, category, visibility, source_agent_id,
        group_ids, source_conversation_id, conflicted, access_count, created_at, updated_at,
        last_accessed_at, valid_from, valid_to, ttl_seconds, confidence, source, observed_at
    )
    SELECT %(user)s, %(key)s, %(value)s::jsonb, %(text)s, %(key_folded)s, %(text_folded)s,
        COALESCE(%(category)s, (SELECT category FROM old), %(new_category)s), %(visibility)s, %(owner)s,
        %(groups)s::jsonb, %(conversation)s, false, 0, %(now)s, %(now)s,
        NULL, %(now)s, %(valid_to)s, %(ttl_seconds)s::integer, %(confidence)s::float8, %(source)s::varchar,
        %(observed)s
    WHERE EXISTS (SELECT 1 FROM old) OR (SELECT n FROM room) < %(cap)s
    ON CONFLICT {conflict} DO UPDATE SET
        value = excluded.value, value_text = excluded.value_text, text_folded = excluded.text_folded,
        category = excluded.category, group_ids = excluded.group_ids,
        source_conversation_id = excluded.source_conversation_id, conflicted = excluded.conflicted,
        updated_at = excluded.updated_at, valid_from = excluded.valid_from, valid_to = excluded.valid_to,
        ttl_seconds = excluded.ttl_seconds, superseded_by_id = NULL, confidence = excluded.confidence,
        source = excluded.source, observed_at = excluded.observed_at{set_visibility}
    WHERE {entry}.observed_at <= excluded.observed_at
    RETURNING id, created_at, access_count, last_accessed_at, source_agent_id, category
), event AS (
    INSERT INTO {event} (
        entry_id, user_id, key, action, actor_type, actor_id, key_prefix, old_value, new_value, owner,
        old_visibility, old_group_ids, visibility, group_ids, created_at, provenance, observed_at, valid_to
    )
    SELECT up.id, %(user)s, %(key)s,
        CASE WHEN EXISTS (SELECT 1 FROM old) THEN %(updated)s ELSE %(created)s END,
        %(actor_type)s, %(actor_id)s, %(key_prefix)s, (SELECT value FROM old), %(value)s::jsonb,
        COALESCE(up.source_agent_id, ''), COALESCE((SELECT visibility FROM old), %(visibility)s),
        COALESCE((SELECT group_ids FROM old), %(groups)s::jsonb), %(visibility)s, %(groups)s::jsonb, %(now)s,
        %(provenance)s::jsonb, %(observed)s, %(valid_to)s
    FROM up
)
SELECT (SELECT group_ids FROM old), (SELECT n FROM room), (SELECT id FROM old), (SELECT observed_at FROM old),
    up.id, up.created_at, up.access_count,
    up.last_accessed_at, up.source_agent_id, up.category
FROM (SELECT 1 AS one) AS o LEFT JOIN up ON true"""

# The upsert key of a global entry: one per user and key.
_GLOBAL_KEY = sql.SQL("user_id = %(user)s AND key = %(key)s AND visibility = 'global'")
_GLOBAL_CONFLICT = sql.SQL("(user_id, key) WHERE visibility = 'global'")
# The upsert key of any other entry: one per user, key and owning agent.
_OWNED_KEY = sql.SQL(
    "user_id = %(user)s AND key = %(key)s AND NOT (visibility = 'global') AND source_agent_id = %(owner)s"
)
_OWNED_CONFLICT = sql.SQL("(user_id, key, source_agent_id) WHERE NOT (visibility = 'global')")


# The entries the cap counts: the owner's (%(owner)s), or, for a write with no owner, those with none.
_OWNED_BY = sql.SQL("source_agent_id = %(owner)s")
_OWNED_BY_NONE = sql.SQL("source_agent_id IS NULL")


@cache
def _upsert_sql(*, is_global: bool, owned: bool) -> sql.Composed:
    return sql.SQL(_UPSERT).format(
        entry=ENTRY,
        event=EVENT,
        owned_by=_OWNED_BY if owned else _OWNED_BY_NONE,
        on_key=_GLOBAL_KEY if is_global else _OWNED_KEY,
        conflict=_GLOBAL_CONFLICT if is_global else _OWNED_CONFLICT,
        set_visibility=sql.SQL("" if is_global else ", visibility = excluded.visibility"),
    )


def upsert_with_event(write: EntryWrite) -> Upserted:
    """The whole write of one entry in one statement (:data:`_UPSERT`), run while the user's lock is held:
    read the entry on the upsert key, count the owner's entries of the user when there is none, insert or
    update only if the entry exists or the count is under ``cap``, and write the history event of what it
    did. A write on a superseded entry makes it current again, with the new value. A write observed before
    the stored value was (``observed_at``) writes nothing and no event: ``kept`` says so, with the stored
    value's time."""
    columns = search_columns(key=write.key, text=write.text)
    params: dict[str, Any] = {
        "user": write.user_id,
        "key": write.key,
        "owner": write.owner,
        "value": json.dumps(write.value),
        "text": columns.value_text,
        "key_folded": columns.key_folded,  # the search columns, written with the key and value_text
        "text_folded": columns.text_folded,
        "category": write.category,
        "new_category": write.new_category,
        "visibility": write.visibility,
        "groups": json.dumps(write.group_ids),
        "conversation": write.conversation_id,
        "confidence": write.confidence,
        "source": write.source,
        "now": write.now,
        "valid_to": write.valid_to,
        "ttl_seconds": write.ttl_seconds,
        "cap": write.cap,
        "updated": MemoryEvent.Action.UPDATED,
        "created": MemoryEvent.Action.CREATED,
        "actor_type": write.actor_type,
        "actor_id": write.actor_id,
        "key_prefix": write.key_prefix,
        "provenance": None if write.provenance is None else json.dumps(write.provenance),
        "observed": write.observed_at or write.now,
    }
    statement = _upsert_sql(is_global=write.visibility == "global", owned=write.owner is not None)
    row = prepared_row(statement, params)
    old_groups, count, old_id, old_observed, *stored = row
    if isinstance(old_groups, str):  # Django's connection reads jsonb as text; JSONField parses it
        old_groups = json.loads(old_groups)
    if stored[0] is None and old_id is not None:  # an entry on the key, and no write: it is newer
        return Upserted(old_groups, count or 0, None, Kept(old_id, old_observed))
    return Upserted(old_groups, count or 0, None if stored[0] is None else Stored(*stored))


def write_events(
    *,
    ids: list[int],
    action: str,
    value_column: Literal["old_value", "new_value"],
    actor_type: str,
    actor_id: str,
    at: datetime,
) -> int:
    """One history event per entry in ``ids`` (one ``INSERT ... SELECT``), each recording who could see the
    value then: the entry's owner, visibility and groups; the value goes to ``value_column``. Returns how
    many events were written."""
    statement = sql.SQL(
        """
        INSERT INTO {events} (
            entry_id, user_id, key, action, actor_type, actor_id, key_prefix, {value_column}, owner,
            old_visibility, old_group_ids, visibility, group_ids, created_at
        )
        SELECT
            id, user_id, key, %(action)s, %(actor_type)s, %(actor_id)s, '', value,
            COALESCE(source_agent_id, ''), visibility, group_ids, visibility, group_ids, %(at)s
        FROM {entries}
        WHERE id = ANY(%(ids)s)
        """
    ).format(
        events=EVENT,
        entries=ENTRY,
        value_column=sql.Identifier(value_column),
    )
    params: dict[str, Any] = {
        "action": action,
        "actor_type": actor_type,
        "actor_id": actor_id,
        "at": at,
        "ids": ids,
    }
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        return cursor.rowcount


def delete_entries(*, ids: list[int]) -> int:
    """Delete entries and their group rows: one statement (the group rows go in a data-modifying CTE first,
    and the entries a deleted summary superseded lose their ``superseded_by``, as the ORM's SET_NULL would;
    their ``valid_to`` keeps them out of reads), no model instances loaded. Returns how many entries were
    deleted."""
    statement = sql.SQL(
        """
        WITH group_rows AS (
            DELETE FROM {groups} WHERE entry_id = ANY(%(ids)s)
        ), sources AS (
            UPDATE {entries} SET superseded_by_id = NULL WHERE superseded_by_id = ANY(%(ids)s)
        )
        DELETE FROM {entries} WHERE id = ANY(%(ids)s)
        """
    ).format(
        groups=ENTRY_GROUP,
        entries=ENTRY,
    )
    with connection.cursor() as cursor:
        cursor.execute(statement, {"ids": ids})
        return cursor.rowcount


# renewed: each entry of %(ids)s that a write gave a TTL, valid again until %(now)s plus it; then the event
# of its value's write (its last created or updated one) holds the same valid_to, so a read as of a past time
# knows how long that value held (usermemory.sql.history.entries_as_of).
_TTL_RENEW = """WITH renewed AS (
    UPDATE {entry} SET valid_to = %(now)s + ttl_seconds * interval '1 second'
    WHERE id = ANY(%(ids)s) AND ttl_seconds IS NOT NULL
    RETURNING id, valid_to
), written AS (
    SELECT DISTINCT ON (e.entry_id) e.id, renewed.valid_to
    FROM {event} e JOIN renewed ON e.entry_id = renewed.id
    WHERE e.action = ANY(%(writes)s) ORDER BY e.entry_id, e.created_at DESC, e.id DESC
), events AS (
    UPDATE {event} SET valid_to = written.valid_to FROM written WHERE {event}.id = written.id
)
SELECT count(*) FROM renewed"""


def ttl_renew(*, ids: list[int], now: datetime) -> int:
    """Renew the TTL of the entries ``ids`` that a write gave one (``valid_to`` becomes ``now`` plus it), and
    of their values' write events, in one statement. Returns how many entries were renewed."""
    statement = sql.SQL(_TTL_RENEW).format(entry=ENTRY, event=EVENT)
    params: dict[str, Any] = {
        "ids": ids,
        "now": now,
        "writes": [MemoryEvent.Action.CREATED, MemoryEvent.Action.UPDATED],
    }
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        return int(cursor.fetchone()[0])
