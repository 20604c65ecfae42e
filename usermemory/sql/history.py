"""History: the events of an entry an agent may see, and the user's entries as history knew them at a past
time."""

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any

from psycopg import sql

from usermemory.models import MemoryEvent
from usermemory.sql.base import AGENT_GROUPS, ENTRY, EVENT, EVENT_FIELDS, events_of_rows, fetch_all

# Whether the agent (%(agent)s) could see an event's old value ({prefix} "old_") or new value (""): the scope
# the event recorded (owner, visibility and groups when it was written) meets the agent as Visible meets an
# entry: global, ``self`` owned by the agent, or ``group`` sharing a group the agent is a member of.
_SEEN = """(
    {visibility} = 'global'
    OR ({visibility} = 'self' AND owner = %(agent)s)
    OR ({visibility} = 'group' AND EXISTS (
        SELECT 1 FROM jsonb_array_elements_text({groups}) AS g(value) WHERE g.value IN ({agent_groups})
    ))
)"""


@cache
def seen_by_agent(*, old: bool) -> sql.Composed:
    """Whether the agent ``%(agent)s`` could see a row's old value (``old``) or new value, from the row's
    ``owner``, ``[old_]visibility`` and ``[old_]group_ids``: history's rule, which the change feed and the
    webhooks (:mod:`events.store`) apply to their rows too, never a copy of it."""
    prefix = "old_" if old else ""
    return sql.SQL(_SEEN).format(
        visibility=sql.Identifier(f"{prefix}visibility"),
        groups=sql.Identifier(f"{prefix}group_ids"),
        agent_groups=AGENT_GROUPS,
    )


@dataclass(frozen=True)
class SeenEvent:
    """A history event as an agent may see it: a value it could not see when the event was written is
    ``None`` in ``event``, and flagged hidden."""

    event: MemoryEvent
    old_value_hidden: bool
    new_value_hidden: bool


_EVENTS_SEEN = """SELECT {columns}, NOT {seen_old}, NOT {seen_new} FROM {event}
WHERE entry_id = %(entry)s AND NOT (action = ANY(%(skip)s)) AND ({seen_old} OR {seen_new})
ORDER BY created_at, id LIMIT %(limit)s"""


@cache
def _events_seen_sql() -> sql.Composed:
    return sql.SQL(_EVENTS_SEEN).format(
        columns=sql.SQL(", ").join([sql.Identifier(str(f.column)) for f in EVENT_FIELDS]),
        seen_old=seen_by_agent(old=True),
        seen_new=seen_by_agent(old=False),
        event=EVENT,
    )


def events_seen_by_agent(
    *, entry_id: int, agent_id: str, skip_actions: Sequence[str], limit: int
) -> list[SeenEvent]:
    """The first ``limit`` events of an entry (oldest first, none of ``skip_actions``) in which the agent
    could see the old value or the new value."""
    params: dict[str, Any] = {
        "entry": entry_id,
        "agent": agent_id,
        "skip": list(skip_actions),
        "limit": limit,
    }
    rows = fetch_all(_events_seen_sql(), params)
    events = events_of_rows([row[:-2] for row in rows])
    seen = []
    for event, (*_, old_hidden, new_hidden) in zip(events, rows, strict=True):
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
    observed_at: datetime | None = None  # its last write's (None: history holds no write of it)
    valid_to: datetime | None = None  # until when its last write's value held (None: until changed)


# Each entry's last event by %(as_of)s that left it holding a value, with when it was created and last
# written, unless that write's value had expired by then (its valid_to, which a TTL's renewal moves on);
# {seen}: only the values the agent could see (TRUE for a viewer or an admin).
_AS_OF = """WITH past AS (
    SELECT * FROM {event} WHERE user_id = %(user)s AND entry_id IS NOT NULL AND created_at <= %(as_of)s
), last AS (
    SELECT DISTINCT ON (entry_id) * FROM past ORDER BY entry_id, created_at DESC, id DESC
), written AS (
    SELECT entry_id, min(created_at) AS created,
        max(created_at) FILTER (WHERE action = ANY(%(writes)s)) AS updated,
        (array_agg(observed_at ORDER BY created_at DESC, id DESC) FILTER (WHERE action = ANY(%(writes)s)))[1]
            AS observed,
        (array_agg(valid_to ORDER BY created_at DESC, id DESC) FILTER (WHERE action = ANY(%(writes)s)))[1]
            AS valid_to
    FROM past GROUP BY entry_id
), live AS (
    SELECT * FROM last WHERE action = ANY(%(live)s) AND {seen}
)
SELECT live.entry_id, live.key, live.new_value, live.visibility, NULLIF(live.owner, ''), live.group_ids,
    written.created, written.updated, COALESCE(e.category, ''), written.observed, written.valid_to
FROM live JOIN written ON written.entry_id = live.entry_id
LEFT JOIN {entry} e ON e.id = live.entry_id
WHERE written.valid_to IS NULL OR written.valid_to > %(as_of)s
ORDER BY written.updated DESC NULLS LAST, live.entry_id DESC LIMIT %(limit)s OFFSET %(offset)s"""


@cache
def _as_of_sql(*, agent: bool) -> sql.Composed:
    return sql.SQL(_AS_OF).format(
        event=EVENT, seen=seen_by_agent(old=False) if agent else sql.SQL("TRUE"), entry=ENTRY
    )


def entries_as_of(
    *, user_id: str, agent_id: str | None, as_of: datetime, limit: int, offset: int
) -> list[PastEntry]:
    """One page of the user's entries as history knew them at ``as_of``, newest write first: each entry
    whose last event by then left it holding a value (:data:`LIVE_ACTIONS`), with that value, unless the
    value had expired by then (its write's ``valid_to``: a TTL or a validTo, renewed). For an agent
    (``agent_id``), only the values it could see when they were written (the scope the event recorded met
    by the agent's groups now, as in :func:`events_seen_by_agent`). The category is the entry's current one
    (history does not record it), "" for an entry gone since."""
    params: dict[str, Any] = {
        "user": user_id,
        "agent": agent_id,
        "as_of": as_of,
        "writes": list(WRITE_ACTIONS),
        "live": list(LIVE_ACTIONS),
        "limit": limit,
        "offset": offset,
    }
    rows = fetch_all(_as_of_sql(agent=agent_id is not None), params)
    return [
        PastEntry(
            row[0],
            row[1],
            json.loads(row[2]) if isinstance(row[2], str) else row[2],
            row[3],
            row[4],
            json.loads(row[5]) if isinstance(row[5], str) else row[5],
            *row[6:],
        )
        for row in rows
    ]
