"""Batch writes of entries (Dream's maintenance): the history events of a batch, and the deletion of a batch.

One function per statement, in the manner of Zulip's ``zerver/lib/retention.py``: the statement a whole
template that reads as SQL, its identifiers (tables from the models, the event's value column) composed with
``psycopg.sql.Identifier``, its ``%(name)s`` parameters filled in the function that runs it. A batch's ids
travel as one array parameter (``= ANY(%(ids)s)``). Statements run on Django's ``connection.cursor()``.
"""

from datetime import datetime
from typing import Any, Literal

from django.db import connection
from psycopg import sql

from usermemory.models import MemoryEntry, MemoryEntryGroup, MemoryEvent


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
        events=sql.Identifier(MemoryEvent._meta.db_table),
        entries=sql.Identifier(MemoryEntry._meta.db_table),
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
        groups=sql.Identifier(MemoryEntryGroup._meta.db_table),
        entries=sql.Identifier(MemoryEntry._meta.db_table),
    )
    with connection.cursor() as cursor:
        cursor.execute(statement, {"ids": ids})
        return cursor.rowcount
