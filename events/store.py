"""The events app's hand-written statements: the events after a position, in the feed's order, that an
agent may see (the change feed and every delivery read through it), and the position a new subscription
starts from.

The order is ``(txid, id)``, and only events of transactions older than the oldest one still running are
read (``txid < pg_snapshot_xmin(pg_current_snapshot())``). An id alone is no commit order: a transaction
that took id 10 may commit after one that took id 11, and a reader that had passed 11 would skip 10 for
ever. Every transaction below the snapshot's xmin has ended, so no event can appear below that horizon
later; a reader that resumes after ``(txid, id)`` misses none. The price: a transaction that stays open
holds the feed back (it never loses an event), and events of one transaction come out together.
"""

from dataclasses import dataclass
from functools import cache
from typing import Any

from django.db import connection
from psycopg import sql

from events.models import Event
from memoryplatform.store import instances_from_rows, query_text
from usermemory.sql.history import seen_by_agent

EVENT_TABLE = sql.Identifier(Event._meta.db_table)
EVENT_FIELDS = tuple(Event._meta.concrete_fields)
HORIZON = sql.SQL("pg_snapshot_xmin(pg_current_snapshot())::text::bigint")
LAST_ID = 2**63 - 1  # a position after every id of a transaction


@dataclass(frozen=True)
class SeenEvent:
    """An event as an agent may see it: a value it could not see is hidden (and ``None`` in ``event``)."""

    event: Event
    old_value_hidden: bool
    new_value_hidden: bool


_AFTER = """SELECT {columns}, NOT {seen_old}, NOT {seen_new} FROM {event}
WHERE (txid, id) > (%(txid)s, %(id)s) AND txid < {horizon}
  AND (cardinality(%(types)s::text[]) = 0 OR type = ANY(%(types)s::text[]))
  AND ({seen_old} OR {seen_new})
ORDER BY txid, id LIMIT %(limit)s"""


@cache
def _after_sql(*, agent_view: bool) -> sql.Composed:
    every = sql.SQL("TRUE")
    return sql.SQL(_AFTER).format(
        columns=sql.SQL(", ").join([sql.Identifier(str(f.column)) for f in EVENT_FIELDS]),
        seen_old=seen_by_agent(old=True) if agent_view else every,
        seen_new=seen_by_agent(old=False) if agent_view else every,
        event=EVENT_TABLE,
        horizon=HORIZON,
    )


def events_after(
    *, agent_id: str | None, types: list[str], txid: int, event_id: int, limit: int
) -> list[SeenEvent]:
    """The first ``limit`` events after position ``(txid, event_id)`` below the horizon, oldest first, of
    ``types`` (empty: all), in which ``agent_id`` could see the old or the new value (``None``: every
    event, every value: a viewer's or an admin's feed)."""
    params: dict[str, Any] = {
        "txid": txid,
        "id": event_id,
        "types": types,
        "agent": agent_id,
        "limit": limit,
    }
    with connection.cursor() as cursor:
        cursor.execute(query_text(_after_sql(agent_view=agent_id is not None)), params)
        rows = cursor.fetchall()
    events = instances_from_rows(Event, EVENT_FIELDS, [row[:-2] for row in rows])
    seen = []
    for event, (*_, old_hidden, new_hidden) in zip(events, rows, strict=True):
        if old_hidden:
            event.old_value = None
        if new_hidden:
            event.value = None
        seen.append(SeenEvent(event, old_hidden, new_hidden))
    return seen


def start_position() -> tuple[int, int]:
    """The position from which a reader sees only events not yet committed: after every transaction below
    the horizon."""
    with connection.cursor() as cursor:
        cursor.execute(query_text(sql.SQL("SELECT {horizon} - 1").format(horizon=HORIZON)))
        row = cursor.fetchone()
    assert row is not None  # noqa: S101 (a SELECT of one value returns one row)
    return int(row[0]), LAST_ID
