"""Hand-written SQL for the hottest paths (recall and upsert), built once per shape and cached.

The ORM spends more time compiling the visible-entries query than the database spends running it (profile in
``bench/RESULTS.md``), so recall is one statement written here: it picks the visible entries, counts their
access and returns them, Only table and column names, taken from the models,
are interpolated; every value is a parameter.
"""

from functools import cache

from apikeys.models import AgentGroup
from memoryplatform.locks import ADVISORY_XACT_LOCK
from memoryplatform.rows import ModelRows
from usermemory.models import MemoryEntry, MemoryEntryGroup, MemoryEvent, RecallOrder, TurnWriteCount

ENTRY_TABLE = MemoryEntry._meta.db_table
GROUP_TABLE = MemoryEntryGroup._meta.db_table
# What recall and search return: every column but value_text (search text, which no caller reads; the model
# loads a deferred field on access).
ENTRIES = ModelRows(MemoryEntry, exclude=["value_text"])
EVENT_TABLE = MemoryEvent._meta.db_table


def _members_table() -> tuple[str, str, str]:
    through = AgentGroup.members.through._meta
    return (
        through.db_table,
        through.get_field("agentgroup").column,
        through.get_field("agent").column,
    )


@cache
def visible_where(n_groups: int | None) -> str:
    """Visible(user, agent, groups) as SQL, with parameters ``user, agent, user[, group...]``, or
    ``user, agent, user, agent`` when ``n_groups`` is ``None``: every group the agent is a member of, read by
    a subquery in the same statement."""
    if n_groups is None:
        members, group_column, agent_column = _members_table()
        groups = f"SELECT {group_column} FROM {members} WHERE {agent_column} = %s"
    elif n_groups == 0:
        groups = "NULL"
    else:
        groups = ", ".join(["%s"] * n_groups)
    return (
        f"user_id = %s AND (visibility = 'global' OR (visibility = 'self' AND source_agent_id = %s) OR "
        f"(visibility = 'group' AND id IN (SELECT entry_id FROM {GROUP_TABLE} "
        f"WHERE user_id = %s AND group_id IN ({groups}))))"
    )


def visible_params(
    *, user_id: str, agent_id: str, group_ids: list[str] | None
) -> tuple[int | None, list[str]]:
    """The shape (``n_groups`` for :func:`visible_where`) and parameters of Visible(user, agent, groups);
    ``group_ids=None`` means every group the agent is a member of."""
    if group_ids is None:
        return None, [user_id, agent_id, user_id, agent_id]
    return len(group_ids), [user_id, agent_id, user_id, *group_ids]


@cache
def entry_columns(*, agent_view: bool, n_groups: int | None) -> str:
    """:data:`ENTRIES`' columns for a SELECT list or RETURNING clause. In an agent's read (``agent_view``),
    ``conflicted`` is what that agent may see: a stored flag holds only while another entry of the set that
    the agent sees (Visible, shaped by ``n_groups``) has another value, so the flag never reveals a value the
    agent cannot see. It then takes the visible parameters (:func:`visible_params`) again."""
    if not agent_view:
        return ENTRIES.columns()
    conflict = (
        f"CASE WHEN {ENTRY_TABLE}.conflicted THEN EXISTS (SELECT 1 FROM {ENTRY_TABLE} AS other "
        f"WHERE other.key = {ENTRY_TABLE}.key AND other.value_text <> {ENTRY_TABLE}.value_text "
        f"AND {visible_where(n_groups)}) ELSE false END"
    )
    return ", ".join(conflict if c == "conflicted" else c for c in ENTRIES.columns().split(", "))


@cache
def recall_sql(*, order: str, n_groups: int | None, agent_view: bool = False) -> str:
    """One statement: pick the entries to recall, mark their access and return them (unordered).

    Every recall sets ``last_accessed_at``; only ``most_accessed`` counts one access of each entry in
    ``access_count`` (EDDI: ``most_recent`` has no side effect on it).

    Parameters: the user's recall lock ``namespace, user`` first; the visible
    parameters and ``head`` (how many of the newest entries to take); for ``most_accessed`` the visible
    parameters again and ``rest`` (how many of the most accessed others); then ``now - granularity`` and
    ``now`` for ``last_accessed_at``; with ``agent_view`` (an agent key's recall) the visible parameters
    again, for the ``conflicted`` it may see (:func:`entry_columns`). The rows come back unordered:
    :func:`usermemory.services.memory_recall` orders them.

    The lock queues concurrent recalls of one user before they pick their rows, so each counts its access
    once the last has committed. Without it they queue on the rows' locks, and each re-reads every row it
    waited on: measured on the heaviest user, 4 clients did 32-38 recalls a second against 430-480 for one.
    """
    where = visible_where(n_groups)
    recent = "ORDER BY updated_at DESC, id DESC"
    # `rest` reads `head`, so `head` runs first and takes the lock before any row is read
    picks = f"WITH user_lock AS MATERIALIZED (SELECT {ADVISORY_XACT_LOCK} AS held), "
    head_where = f"(SELECT true FROM user_lock) AND {where}"
    picks += f"head AS (SELECT id FROM {ENTRY_TABLE} WHERE {head_where} {recent} LIMIT %s)"
    chosen = "SELECT id FROM head"
    if order == RecallOrder.MOST_ACCESSED:
        picks += (
            f", rest AS (SELECT id FROM {ENTRY_TABLE} WHERE {where} AND id NOT IN (SELECT id FROM head) "
            f"ORDER BY access_count DESC, updated_at DESC, id DESC LIMIT %s)"
        )
        chosen += " UNION ALL SELECT id FROM rest"
    # Only most_accessed counts an access (EDDI): most_recent moves last_accessed_at alone.
    count = "access_count = access_count + 1, " if order == RecallOrder.MOST_ACCESSED else ""
    return (
        f"{picks} UPDATE {ENTRY_TABLE} SET {count}last_accessed_at = CASE "
        f"WHEN last_accessed_at IS NULL OR last_accessed_at < %s THEN %s ELSE last_accessed_at END "
        f"WHERE id IN ({chosen}) RETURNING {entry_columns(agent_view=agent_view, n_groups=n_groups)}"
    )


@cache
def search_sql(*, n_groups: int | None, visible: bool, category: bool) -> str:
    """A user's entries whose key or value text holds a literal, newest first, one page.

    Parameters: with ``visible`` (an agent's read) the visible parameters for ``conflicted``
    (:func:`entry_columns`) and again for the rows, else ``user``; the LIKE pattern twice
    (:func:`usermemory.lookups.like_escape`, wrapped in ``%``); ``category`` when filtered; limit, offset.
    """
    where = visible_where(n_groups) if visible else "user_id = %s"
    where += " AND (key ILIKE %s OR value_text ILIKE %s)"
    if category:
        where += " AND category = %s"
    return (
        f"SELECT {entry_columns(agent_view=visible, n_groups=n_groups)} FROM {ENTRY_TABLE} WHERE {where} "
        f"ORDER BY updated_at DESC, id DESC LIMIT %s OFFSET %s"
    )


@cache
def event_seen_sql(*, old: bool) -> str:
    """Whether an agent could see an event's old value (``old``) or new value: the scope the event recorded
    (owner, visibility and groups when it was written) meets the agent as Visible meets an entry: global,
    ``self`` owned by the agent, or ``group`` sharing a group the agent is a member of. Parameters:
    ``agent, agent``."""
    members, group_column, agent_column = _members_table()
    prefix = "old_" if old else ""
    visibility, groups = f"{EVENT_TABLE}.{prefix}visibility", f"{EVENT_TABLE}.{prefix}group_ids"
    elements = f"jsonb_array_elements_text({groups}) AS g(value)"
    return (
        f"({visibility} = 'global' OR ({visibility} = 'self' AND {EVENT_TABLE}.owner = %s) OR "
        f"({visibility} = 'group' AND EXISTS (SELECT 1 FROM {elements} WHERE g.value IN "
        f"(SELECT {group_column} FROM {members} WHERE {agent_column} = %s))))"
    )


# --- Upsert ----------------------------------------------------------------------------------------------

TURN_TABLE = TurnWriteCount._meta.db_table
EVENT_COLUMNS = (
    "entry_id, user_id, key, action, actor_type, actor_id, key_prefix, old_value, new_value, owner, "
    "old_visibility, old_group_ids, visibility, group_ids, created_at"
)
UPSERT_RETURNING = "id, created_at, access_count, last_accessed_at, source_agent_id, category"


@cache
def turn_count_sql() -> str:
    """Count one write in the agent's turn: ``INSERT .. ON CONFLICT DO UPDATE .. RETURNING count``, so
    concurrent writes count exactly. A past window (no turn id: 60 s) starts again at 1.

    Parameters: ``agent, user, turn, now``, the user's advisory lock ``namespace, user``, which the same
    statement takes first, then ``cutoff, cutoff``.
    """
    source = f"SELECT %s, %s, %s, %s, 1 FROM (SELECT {ADVISORY_XACT_LOCK}) AS user_lock"
    return (
        f"INSERT INTO {TURN_TABLE} (agent_id, user_id, turn_id, window_start, count) {source} "
        f"ON CONFLICT (agent_id, user_id, turn_id) DO UPDATE SET "
        f"count = CASE WHEN {TURN_TABLE}.window_start < %s THEN 1 ELSE {TURN_TABLE}.count + 1 END, "
        f"window_start = CASE WHEN {TURN_TABLE}.window_start < %s THEN excluded.window_start "
        f"ELSE {TURN_TABLE}.window_start END "
        f"RETURNING count"
    )


def _upsert_key(*, is_global: bool) -> str:
    """The entries one upsert key names (the two partial unique indexes)."""
    if is_global:
        return "user_id = %s AND key = %s AND visibility = 'global'"
    return "user_id = %s AND key = %s AND NOT (visibility = 'global') AND source_agent_id = %s"


def _upsert_insert(*, is_global: bool, values: str) -> str:
    """``INSERT .. ON CONFLICT`` on the upsert key that fits the visibility, ``RETURNING`` the stored columns;
    ``values`` is a ``VALUES (..)`` list or a ``SELECT`` of the 14 inserted columns."""
    if is_global:
        target = "(user_id, key) WHERE visibility = 'global'"
        visibility_update = ""  # a global entry stays global, and keeps its owner
    else:
        target = "(user_id, key, source_agent_id) WHERE NOT (visibility = 'global')"
        visibility_update = ", visibility = excluded.visibility"
    return (
        f"INSERT INTO {ENTRY_TABLE} (user_id, key, value, value_text, category, visibility, "
        f"source_agent_id, group_ids, source_conversation_id, conflicted, access_count, created_at, "
        f"updated_at, last_accessed_at) {values} "
        f"ON CONFLICT {target} DO UPDATE SET value = excluded.value, value_text = excluded.value_text, "
        f"category = excluded.category, group_ids = excluded.group_ids, "
        f"source_conversation_id = excluded.source_conversation_id, conflicted = excluded.conflicted, "
        f"updated_at = excluded.updated_at{visibility_update} "
        f"RETURNING {UPSERT_RETURNING}"
    )


@cache
def upsert_event_sql(*, is_global: bool) -> str:
    """The whole write in one statement, run while the user's lock is held. It reads the entry on
    the upsert key, counts the user's entries when there is none, inserts or updates only if the entry exists
    or the count is under the cap, and writes the history event of what it did.

    Parameters: ``user, key[, owner]`` (the upsert key); ``user`` (the count); ``user, key, value (JSON),
    value_text, category (NULL: keep the stored one), fallback category, visibility, owner, group_ids (JSON),
    conversation, conflicted, now, now``; ``cap``; the event's ``user, key, updated, created, actor_type,
    actor_id, key_prefix, new (JSON), visibility, group_ids (JSON), visibility, group_ids (JSON), now``: who
    could see the old value (the stored entry's visibility and groups, else the new ones) and the new one; its
    owner is the stored entry's.

    Returns one row: the entry's id and group_ids (JSON) before the write (NULL when new), the user's count
    when there was no entry (else 0), then :data:`UPSERT_RETURNING`: NULL when the cap stopped the insert.
    """
    values = (
        "SELECT %s, %s, %s::jsonb, %s, COALESCE(%s, (SELECT category FROM old), %s), %s, %s, %s::jsonb, "
        "%s, %s, 0, %s, %s, NULL WHERE EXISTS (SELECT 1 FROM old) OR (SELECT n FROM room) < %s"
    )
    insert = _upsert_insert(is_global=is_global, values=values)
    return (
        f"WITH old AS (SELECT id, value, category, group_ids, visibility FROM {ENTRY_TABLE} "
        f"WHERE {_upsert_key(is_global=is_global)}), "
        f"room AS (SELECT count(*) AS n FROM {ENTRY_TABLE} "
        f"WHERE user_id = %s AND NOT EXISTS (SELECT 1 FROM old)), "
        f"up AS ({insert}), "
        f"event AS (INSERT INTO {EVENT_TABLE} ({EVENT_COLUMNS}) SELECT up.id, %s, %s, "
        f"CASE WHEN EXISTS (SELECT 1 FROM old) THEN %s ELSE %s END, %s, %s, %s, (SELECT value FROM old), "
        f"%s::jsonb, COALESCE(up.source_agent_id, ''), COALESCE((SELECT visibility FROM old), %s), "
        f"COALESCE((SELECT group_ids FROM old), %s::jsonb), %s, %s::jsonb, %s FROM up) "
        f"SELECT (SELECT id FROM old), (SELECT group_ids FROM old), (SELECT n FROM room), "
        f"up.{', up.'.join(UPSERT_RETURNING.split(', '))} "
        f"FROM (SELECT 1 AS one) AS o LEFT JOIN up ON true"
    )
