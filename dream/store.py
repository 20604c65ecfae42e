"""Dream's hand-written statements: the history events of a batch, and the deletion of a batch's entries.

One function per statement, keyword arguments, ``%(name)s`` placeholders filled here, identifiers from the
models. A batch's ids travel as one array parameter (``= ANY(%(ids)s)``).
"""

from datetime import datetime
from typing import Any, Literal

from django.db import connection

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
    qn = connection.ops.quote_name
    visibility, groups = qn("visibility"), qn("group_ids")
    sql = (
        f"INSERT INTO {qn(MemoryEvent._meta.db_table)} "  # noqa: S608 (identifiers from model metadata)
        f"({qn('entry_id')}, {qn('user_id')}, {qn('key')}, {qn('action')}, {qn('actor_type')}, "
        f"{qn('actor_id')}, {qn('key_prefix')}, {qn(value_column)}, {qn('owner')}, {qn('old_visibility')}, "
        f"{qn('old_group_ids')}, {visibility}, {groups}, {qn('created_at')}) "
        f"SELECT {qn('id')}, {qn('user_id')}, {qn('key')}, %(action)s, %(actor_type)s, %(actor_id)s, "
        f"%(key_prefix)s, {qn('value')}, COALESCE({qn('source_agent_id')}, ''), {visibility}, {groups}, "
        f"{visibility}, {groups}, %(at)s "
        f"FROM {qn(MemoryEntry._meta.db_table)} WHERE {qn('id')} = ANY(%(ids)s)"
    )
    params: dict[str, Any] = {
        "action": action,
        "actor_type": actor_type,
        "actor_id": actor_id,
        "key_prefix": "",
        "at": at,
        "ids": ids,
    }
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount


def delete_entries(*, ids: list[int]) -> int:
    """Delete entries and their group rows: one statement (the group rows go in a data-modifying CTE first,
    and the entries a deleted summary superseded lose their ``superseded_by``, as the ORM's SET_NULL would;
    their ``valid_to`` keeps them out of reads), no model instances loaded. Returns how many entries were
    deleted."""
    qn = connection.ops.quote_name
    entries = qn(MemoryEntry._meta.db_table)
    sql = (
        f"WITH group_rows AS (DELETE FROM {qn(MemoryEntryGroup._meta.db_table)} "  # noqa: S608 (identifiers)
        f"WHERE {qn('entry_id')} = ANY(%(ids)s)), "
        f"sources AS (UPDATE {entries} SET {qn('superseded_by_id')} = NULL "
        f"WHERE {qn('superseded_by_id')} = ANY(%(ids)s)) "
        f"DELETE FROM {qn(MemoryEntry._meta.db_table)} WHERE {qn('id')} = ANY(%(ids)s)"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, {"ids": ids})
        return cursor.rowcount
