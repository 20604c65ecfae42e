"""The events app's hand-written statements: the events after a position, in the feed's order, that an
agent may see (the change feed and every delivery read through it), the position a new subscription
starts from, and the retention's mark (how far it has deleted).

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

from events.models import Event, PruneMark
from memoryplatform.store import instances_from_rows, query_text
from usermemory.sql.history import seen_by_agent

EVENT_TABLE = sql.Identifier(Event._meta.db_table)
MARK_TABLE = sql.Identifier(PruneMark._meta.db_table)
EVENT_FIELDS = tuple(Event._meta.concrete_fields)
HORIZON = sql.SQL("pg_snapshot_xmin(pg_current_snapshot())::text::bigint")
LAST_ID = 2**63 - 1  # a position after every id of a transaction
TXID, ID = (EVENT_FIELDS.index(Event._meta.get_field(name)) for name in ("txid", "id"))


@dataclass(frozen=True)
class SeenEvent:
    """An event as an agent may see it: a value it could not see is hidden (and ``None`` in ``event``)."""

    event: Event
    old_value_hidden: bool
    new_value_hidden: bool


@dataclass(frozen=True)
class EventsRead:
    """The events a read gave, and how far it read: ``position``, the last event it scanned (shown or not;
    ``None`` when it scanned none), from which the next read goes on; ``more``, whether it stopped at one of
    its bounds (the page or the scan) rather than at the horizon."""

    events: list[SeenEvent]
    position: tuple[int, int] | None
    more: bool


SCAN_ROWS = 2000
"""At most this many events are scanned by one read, seen or not: a reader that may see few of them (an
agent's view, a few types) moves past the rest in steps of this size instead of scanning the whole unseen
tail again at every poll. At least the largest page (the feed's 500)."""

# The events after a position below the horizon, in order, at most %(scan)s of them: each with whether the
# reader sees it (``shown``: its type is asked for, and the agent could see its old or new value) and the
# running count of those shown (``nth``). Rows are read while ``nth <= %(limit)s``, so the last row read is
# just before the first event that would not fit the page: every event up to it was scanned and every shown
# one returned, and the next read starts after it without skipping one (PostgreSQL stops the scan there: a
# running count under a bound is a window "run condition").
_AFTER = """SELECT * FROM (
    SELECT scanned.*, count(*) FILTER (WHERE shown) OVER (ORDER BY txid, id ROWS UNBOUNDED PRECEDING) AS nth
    FROM (
        SELECT {columns}, NOT {seen_old} AS old_hidden, NOT {seen_new} AS new_hidden,
            (cardinality(%(types)s::text[]) = 0 OR type = ANY(%(types)s::text[]))
                AND ({seen_old} OR {seen_new}) AS shown
        FROM {event}
        WHERE (txid, id) > (%(txid)s, %(id)s) AND txid < {horizon}
        ORDER BY txid, id LIMIT %(scan)s
    ) AS scanned
) AS counted
WHERE nth <= %(limit)s
ORDER BY txid, id"""


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
) -> EventsRead:
    """The first ``limit`` events after position ``(txid, event_id)`` below the horizon, oldest first, of
    ``types`` (empty: all), in which ``agent_id`` could see the old or the new value (``None``: every
    event, every value: a viewer's or an admin's feed), among at most :data:`SCAN_ROWS` scanned; and the
    position of the last one scanned."""
    params: dict[str, Any] = {
        "txid": txid,
        "id": event_id,
        "types": types,
        "agent": agent_id,
        "limit": limit,
        "scan": max(SCAN_ROWS, limit),
    }
    with connection.cursor() as cursor:
        cursor.execute(query_text(_after_sql(agent_view=agent_id is not None)), params)
        rows = cursor.fetchall()
    width = len(EVENT_FIELDS)
    shown = [row for row in rows if row[width + 2]]
    events = instances_from_rows(Event, EVENT_FIELDS, [row[:width] for row in shown])
    seen = []
    for event, row in zip(events, shown, strict=True):
        old_hidden, new_hidden = row[width], row[width + 1]
        if old_hidden:
            event.old_value = None
        if new_hidden:
            event.value = None
        seen.append(SeenEvent(event, old_hidden, new_hidden))
    position = (rows[-1][TXID], rows[-1][ID]) if rows else None
    return EventsRead(seen, position, more=len(rows) == params["scan"] or len(seen) == limit)


def events_exist_after(*, txid: int, event_id: int) -> bool:
    """Whether any event (of any type, whoever may see it) lies after position ``(txid, event_id)`` below
    the horizon: one probe of the feed's index."""
    statement = sql.SQL(
        "SELECT EXISTS (SELECT 1 FROM {event} WHERE (txid, id) > (%(txid)s, %(id)s) AND txid < {horizon})"
    ).format(event=EVENT_TABLE, horizon=HORIZON)
    with connection.cursor() as cursor:
        cursor.execute(query_text(statement), {"txid": txid, "id": event_id})
        row = cursor.fetchone()
    return bool(row and row[0])


def start_position() -> tuple[int, int]:
    """The position from which a reader sees only events not yet committed: after every transaction below
    the horizon."""
    with connection.cursor() as cursor:
        cursor.execute(query_text(sql.SQL("SELECT {horizon} - 1").format(horizon=HORIZON)))
        row = cursor.fetchone()
    assert row is not None  # noqa: S101 (a SELECT of one value returns one row)
    return int(row[0]), LAST_ID


def prune_mark_raise(*, event_ids: list[int]) -> None:
    """Raise the retention's mark to the last position, in the feed's order, of the events ``event_ids`` (a
    batch about to be deleted, in the same transaction); never lower it (of two prunes at once, the later
    position stays). One statement: the batch's rows by primary key."""
    statement = sql.SQL(
        "INSERT INTO {mark} AS mark (id, txid, event_id, raised_at) "
        "SELECT 1, txid, id, now() FROM {event} WHERE id = ANY(%(ids)s) ORDER BY txid DESC, id DESC LIMIT 1 "
        "ON CONFLICT (id) DO UPDATE SET txid = excluded.txid, event_id = excluded.event_id, "
        "raised_at = excluded.raised_at WHERE (mark.txid, mark.event_id) < (excluded.txid, excluded.event_id)"
    ).format(mark=MARK_TABLE, event=EVENT_TABLE)
    with connection.cursor() as cursor:
        cursor.execute(query_text(statement), {"ids": event_ids})


def prune_mark() -> tuple[int, int]:
    """The position of the last event the retention deleted; ``(0, 0)`` when it has deleted none."""
    statement = sql.SQL("SELECT txid, event_id FROM {mark} WHERE id = 1").format(mark=MARK_TABLE)
    with connection.cursor() as cursor:
        cursor.execute(query_text(statement))
        row = cursor.fetchone()
    return (int(row[0]), int(row[1])) if row else (0, 0)


def before_prune_mark(txid: int, event_id: int) -> bool:
    """Whether events after position ``(txid, event_id)`` were deleted by the retention: a reader there may
    have missed some. The beginning (``(0, 0)``) never: it reads from the oldest event kept."""
    return (txid, event_id) != (0, 0) and (txid, event_id) < prune_mark()
