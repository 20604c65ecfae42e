"""Every statement the raw door issues, in one place: the bare SQL the platform should issue, to mirror it.

When the platform's statements change (its schema, its search), change these to match, so the raw door stays
the floor the other doors are measured against. They follow ``usermemory/sql/``'s style: each statement a
whole template that reads as SQL, identifiers composed with psycopg's ``sql.Identifier``, and ``%(name)s``
placeholders (the comment above each statement names them; ``bench/raw.py`` fills them). The tables are
named here, not read from the models, so the raw door runs without Django. The bench's own reads (to pick
users, keys and terms) are at the end.
"""

import re

from psycopg import sql

from memoryplatform.locks import LockId

ENTRY = sql.Identifier("usermemory_memoryentry")
ENTRY_GROUP = sql.Identifier("usermemory_memoryentrygroup")
EVENT = sql.Identifier("usermemory_memoryevent")
TURN = sql.Identifier("usermemory_turnwritecount")
MEMBERS = sql.Identifier("apikeys_agentgroup_members")
CONVERSATION = sql.Identifier("conversations_conversation")
MESSAGE = sql.Identifier("conversations_message")

# The entry columns recall and search return, in order.
COLUMNS = (
    "id",
    "user_id",
    "key",
    "value",
    "category",
    "visibility",
    "source_agent_id",
    "group_ids",
    "source_conversation_id",
    "conflicted",
    "access_count",
    "created_at",
    "updated_at",
    "last_accessed_at",
)
ACCESS_COUNT, RECENT_AT = COLUMNS.index("access_count"), COLUMNS.index("updated_at")  # positions in a row
RECALL_LIMIT = 50  # the recall endpoint's default
PAGE_LIMIT = 1000  # the list/search endpoints' default page

_COLUMNS = sql.SQL(", ").join(sql.Identifier(column) for column in COLUMNS)

# Visible(user, agent): the agent's groups read by a subquery, as the platform's statement does.
# Parameters: user, agent.
VISIBLE = sql.SQL(
    """user_id = %(user)s AND (
        visibility = 'global'
        OR (visibility = 'self' AND source_agent_id = %(agent)s)
        OR (visibility = 'group' AND id IN (
            SELECT entry_id FROM {entry_group} WHERE user_id = %(user)s AND group_id IN (
                SELECT agentgroup_id FROM {members} WHERE agent_id = %(agent)s
            )
        ))
    )"""
).format(entry_group=ENTRY_GROUP, members=MEMBERS)


# --- Recall --------------------------------------------------------------------------------------------

# The user's recall lock, in a statement of its own before the recall (why: usermemory.sql.recall.recall).
# Parameters: recall_lock (LockId.USER_RECALL), user.
_RECALL_LOCK = "SELECT pg_advisory_xact_lock(%(recall_lock)s, hashtext(%(user)s)); "

# The newest %(head)s visible entries; their access marked: last_accessed_at moves to %(now)s where older
# than %(threshold)s, and access_count counts one.
_MOST_RECENT = """WITH head AS (
    SELECT id FROM {entry} WHERE {visible}
    ORDER BY updated_at DESC, id DESC LIMIT %(head)s
)
UPDATE {entry} SET {access_marks}
WHERE id IN (SELECT id FROM head)
RETURNING {columns}"""

# The newest %(head)s visible entries, then the %(rest)s most accessed of the others; marked as above.
_MOST_ACCESSED = """WITH head AS (
    SELECT id FROM {entry} WHERE {visible}
    ORDER BY updated_at DESC, id DESC LIMIT %(head)s
), rest AS (
    SELECT id FROM {entry} WHERE {visible} AND id NOT IN (SELECT id FROM head)
    ORDER BY access_count DESC, updated_at DESC, id DESC LIMIT %(rest)s
)
UPDATE {entry} SET {access_marks}
WHERE id IN (SELECT id FROM head UNION ALL SELECT id FROM rest)
RETURNING {columns}"""

_ACCESS_MARKS = sql.SQL(
    """access_count = access_count + 1, last_accessed_at = CASE
        WHEN last_accessed_at IS NULL OR last_accessed_at < %(threshold)s THEN %(now)s
        ELSE last_accessed_at END"""
)


def recall_head(order: str) -> int:
    """How many of the newest entries a recall takes first (most_accessed fills the rest by access count)."""
    return RECALL_LIMIT if order == "most_recent" else max(1, RECALL_LIMIT // 5)


def recall(order: str) -> sql.Composed:
    """Two statements in one query string, as the platform sends them: take the user's recall lock
    (concurrent recalls of one user queue there, not on the rows' locks), then, with a snapshot taken after
    the lock, pick the visible entries (the newest ``head``; for most_accessed also the most accessed of the
    rest), mark their access and return them (unordered: the caller orders them, as the platform does).
    Parameters: :func:`recall_params`'s, user, agent, threshold (last_accessed_at older than this is
    refreshed), now."""
    template = _MOST_ACCESSED if order == "most_accessed" else _MOST_RECENT
    return sql.SQL(_RECALL_LOCK + template).format(
        entry=ENTRY, visible=VISIBLE, access_marks=_ACCESS_MARKS, columns=_COLUMNS
    )


def recall_params(order: str) -> dict[str, int]:
    """The recall's lock and sizes: the newest ``head`` and, for most_accessed, ``rest`` more."""
    head = recall_head(order)
    return {"recall_lock": LockId.USER_RECALL, "head": head, "rest": RECALL_LIMIT - head}


# --- Upsert and its history event ----------------------------------------------------------------------

# Parameters: user, key, value (JSON text), text, key_folded and text_folded (their str.casefold()),
# category, agent, group_ids (JSON text), conflicted, at.
UPSERT = sql.SQL(
    """INSERT INTO {entry} (
    user_id, key, value, value_text, key_folded, text_folded, category, visibility, source_agent_id,
    group_ids, source_conversation_id, conflicted, access_count, created_at, updated_at, last_accessed_at
)
VALUES (
    %(user)s, %(key)s, %(value)s::jsonb, %(text)s, %(key_folded)s, %(text_folded)s, %(category)s, 'self',
    %(agent)s, %(group_ids)s::jsonb, NULL, %(conflicted)s, 0, %(at)s, %(at)s, NULL
)
ON CONFLICT (user_id, key, source_agent_id) WHERE NOT (visibility = 'global') DO UPDATE SET
    value = excluded.value, value_text = excluded.value_text, text_folded = excluded.text_folded,
    category = excluded.category, group_ids = excluded.group_ids,
    source_conversation_id = excluded.source_conversation_id, conflicted = excluded.conflicted,
    updated_at = excluded.updated_at, visibility = excluded.visibility
RETURNING id"""
).format(entry=ENTRY)

# The event of an upsert: every column after entry_id. Parameters: user, key, action, agent, value, at.
_EVENT_COLUMNS = sql.SQL(
    """user_id, key, action, actor_type, actor_id, key_prefix, old_value, new_value, owner,
    old_visibility, old_group_ids, visibility, group_ids, created_at"""
)
_EVENT_VALUES = sql.SQL(
    """%(user)s, %(key)s, %(action)s, 'agent', %(agent)s, '', NULL, %(value)s::jsonb, %(agent)s,
    'self', '[]', 'self', '[]', %(at)s"""
)

# Parameters: entry_id, and the event's.
INSERT_EVENT = sql.SQL(
    """INSERT INTO {event} (entry_id, {event_columns})
VALUES (%(entry_id)s, {event_values})"""
).format(event=EVENT, event_columns=_EVENT_COLUMNS, event_values=_EVENT_VALUES)

# One statement writes the entry and its event, as the platform's single upsert does.
# Parameters: the upsert's and action.
UPSERT_WITH_EVENT = sql.SQL(
    """WITH up AS (
{upsert}
), event AS (
    INSERT INTO {event} (entry_id, {event_columns})
    SELECT id, {event_values} FROM up
)
SELECT id FROM up"""
).format(upsert=UPSERT, event=EVENT, event_columns=_EVENT_COLUMNS, event_values=_EVENT_VALUES)


# --- Search --------------------------------------------------------------------------------------------

# One user's visible entries whose casefolded key or value holds the casefolded query as a literal substring.
# Parameters: user, agent, folded (the query's str.casefold()), limit.
SEARCH_PER_USER = sql.SQL(
    """SELECT {columns} FROM {entry}
WHERE {visible}
    AND (strpos(key_folded, %(folded)s) > 0 OR strpos(text_folded, %(folded)s) > 0)
ORDER BY updated_at DESC, id DESC LIMIT %(limit)s"""
).format(columns=_COLUMNS, entry=ENTRY, visible=VISIBLE)

# The admin's full-text search across all users (every word, each also as a prefix), on the expression of
# the GIN index memory_fulltext_idx. Parameters: tsquery (from fulltext_terms), limit.
SEARCH_ALL_USERS = sql.SQL(
    """SELECT {columns} FROM {entry}
WHERE to_tsvector('simple'::regconfig, COALESCE(key, '') || ' ' || COALESCE(value_text, ''))
    @@ to_tsquery('simple'::regconfig, %(tsquery)s)
ORDER BY updated_at DESC, id DESC LIMIT %(limit)s"""
).format(columns=_COLUMNS, entry=ENTRY)


def fulltext_terms(query: str) -> str:
    """The query's words (letters and digits), each a quoted prefix lexeme, ANDed: ``'word':* & ...``."""
    return " & ".join(f"'{word}':*" for word in dict.fromkeys(re.findall(r"[^\W_]+", query.lower())))


# --- Conversation append -------------------------------------------------------------------------------

# Parameters: conversation.
LOCK_CONVERSATION = sql.SQL(
    "SELECT next_position FROM {conversation} WHERE id = %(conversation)s FOR UPDATE"
).format(conversation=CONVERSATION)
# Parameters: id, conversation, position, content (JSON text), at. Its number follows the history's last.
INSERT_MESSAGE = sql.SQL(
    """INSERT INTO {message} (
    id, conversation_id, position, seq, channel, role, agent_id, memory_epoch, content, session_id, created_at
)
VALUES (
    %(id)s, %(conversation)s, %(position)s,
    (SELECT coalesce(max(seq), 0) + 1 FROM {message}
        WHERE conversation_id = %(conversation)s AND NOT (channel = 'memory') AND channel = 'history'),
    'history', 'user', NULL, NULL, %(content)s::jsonb, 'bench', %(at)s
)"""
).format(message=MESSAGE)
# Parameters: conversation.
BUMP_CONVERSATION = sql.SQL(
    "UPDATE {conversation} SET next_position = next_position + 1 WHERE id = %(conversation)s"
).format(conversation=CONVERSATION)


# --- GDPR erasure --------------------------------------------------------------------------------------

# Each takes: user.
ERASE_DELETES = tuple(
    sql.SQL("DELETE FROM {table} WHERE user_id = %(user)s").format(table=table)
    for table in (ENTRY_GROUP, ENTRY, EVENT, TURN)
)
# Parameters: user, at.
ERASED_EVENT = sql.SQL(
    """INSERT INTO {event} (entry_id, {event_columns})
VALUES (
    NULL, %(user)s, '', 'erased', 'key', 'admin', '', NULL, NULL, '', 'self', '[]', 'self', '[]', %(at)s
)"""
).format(event=EVENT, event_columns=_EVENT_COLUMNS)


# --- The bench's own reads (not the platform's statements) ---------------------------------------------

# Parameters: agent.
AGENT_GROUPS = sql.SQL("SELECT agentgroup_id FROM {members} WHERE agent_id = %(agent)s ORDER BY 1").format(
    members=MEMBERS
)
USER_SIZES = sql.SQL("SELECT user_id, count(*) FROM {entry} GROUP BY user_id ORDER BY 2, 1").format(
    entry=ENTRY
)
# Parameters: agent, users (a list).
AGENT_OWN_KEYS = sql.SQL(
    """SELECT user_id, key FROM {entry}
WHERE source_agent_id = %(agent)s AND visibility = 'self' AND user_id = ANY(%(users)s)
ORDER BY id"""
).format(entry=ENTRY)
COUNT_ENTRIES = sql.SQL("SELECT count(*) FROM {entry}").format(entry=ENTRY)
# Parameters: user.
USER_TEXTS = sql.SQL("SELECT value_text FROM {entry} WHERE user_id = %(user)s").format(entry=ENTRY)
