"""Recall: the statement that picks the entries an agent recalls, marks their access and returns them."""

from functools import cache
from typing import Any

from psycopg import sql

from usermemory.models import RecallOrder
from usermemory.sql.base import (
    ENTRY,
    MIN_CONFIDENCE,
    EntryRow,
    RecallScope,
    access_marks,
    entry_rows,
    row_columns,
    rows_under_recall_lock,
    visible,
)

# The newest %(head)s visible entries.
_MOST_RECENT = """WITH head AS (
    SELECT id FROM {entry} WHERE {visible} AND {min_confidence}
    ORDER BY updated_at DESC, id DESC LIMIT %(head)s
)
UPDATE {entry} SET {access_marks}
WHERE id IN (SELECT id FROM head)
RETURNING {columns}"""

# The newest %(head)s visible entries, then the %(rest)s most accessed of the others.
_MOST_ACCESSED = """WITH head AS (
    SELECT id FROM {entry} WHERE {visible} AND {min_confidence}
    ORDER BY updated_at DESC, id DESC LIMIT %(head)s
), rest AS (
    SELECT id FROM {entry} WHERE {visible} AND {min_confidence} AND id NOT IN (SELECT id FROM head)
    ORDER BY access_count DESC, updated_at DESC, id DESC LIMIT %(rest)s
)
UPDATE {entry} SET {access_marks}
WHERE id IN (SELECT id FROM head UNION ALL SELECT id FROM rest)
RETURNING {columns}"""


@cache
def _recall_sql(*, order: str, all_of_agent: bool, agent_view: bool) -> sql.Composed:
    template = _MOST_ACCESSED if order == RecallOrder.MOST_ACCESSED else _MOST_RECENT
    return sql.SQL(template).format(
        entry=ENTRY,
        visible=visible(all_of_agent=all_of_agent),
        min_confidence=MIN_CONFIDENCE,
        access_marks=access_marks(order=order),
        columns=row_columns(agent_view=agent_view, all_of_agent=all_of_agent),
    )


def recall(*, scope: RecallScope, head: int, rest: int) -> list[EntryRow]:
    """Pick the entries to recall (the newest ``head``, then for ``most_accessed`` the ``rest`` most accessed
    of the others), mark their access and return them, unordered, as rows (:class:`EntryRow`: the columns
    an answer shows, no model instances).

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
    params: dict[str, Any] = {**scope.params(), "head": head, "rest": rest}
    statement = _recall_sql(
        order=scope.order, all_of_agent=scope.group_ids is None, agent_view=scope.agent_view
    )
    return entry_rows(rows_under_recall_lock(statement, params))
