"""Every statement the raw door issues, in one place: the bare SQL the platform should issue, to mirror it.

When the platform's statements change (its schema, its search), change these to match, so the raw door stays
the floor the other doors are measured against. ``%(name)s`` placeholders; the comment above each statement
names the parameters it takes. The bench's own reads (to pick users, keys and terms) are at the end.
"""

import re

from memoryplatform.locks import LockId

TABLE = "usermemory_memoryentry"
COLS = (
    "id, user_id, key, value, category, visibility, source_agent_id, group_ids, source_conversation_id, "
    "conflicted, access_count, created_at, updated_at, last_accessed_at"
)
ACCESS_COUNT, RECENT_AT = 10, 12  # positions in COLS
RECALL_LIMIT = 50  # the recall endpoint's default
PAGE_LIMIT = 1000  # the list/search endpoints' default page

# Visible(user, agent): the agent's groups read by a subquery, as the platform's statement does.
# Parameters: user, agent.
VISIBLE = (
    "user_id = %(user)s AND (visibility = 'global' OR (visibility = 'self' AND source_agent_id = %(agent)s) "
    "OR (visibility = 'group' AND id IN (SELECT entry_id FROM usermemory_memoryentrygroup "
    "WHERE user_id = %(user)s AND group_id IN (SELECT agentgroup_id FROM apikeys_agentgroup_members "
    "WHERE agent_id = %(agent)s))))"
)


# --- Recall --------------------------------------------------------------------------------------------


def recall_head(order: str) -> int:
    """How many of the newest entries a recall takes first (most_accessed fills the rest by access count)."""
    return RECALL_LIMIT if order == "most_recent" else max(1, RECALL_LIMIT // 5)


def recall(order: str) -> str:
    """Two statements in one query string, as the platform sends them: take the user's recall lock
    (concurrent recalls of one user queue there, not on the rows' locks), then, with a snapshot taken after
    the lock, pick the visible entries (the newest ``head``; for most_accessed also the most accessed of the
    rest), count their access and return them (unordered: the caller orders them, as the platform does).
    Parameters: user, agent, stale_before (last_accessed_at older than this is refreshed), now."""
    head = recall_head(order)
    lock = f"SELECT pg_advisory_xact_lock({LockId.USER_RECALL}, hashtext(%(user)s))"
    recent = f"ORDER BY updated_at DESC, id DESC LIMIT {head}"
    picks = f"WITH head AS (SELECT id FROM {TABLE} WHERE {VISIBLE} {recent})"
    chosen = "SELECT id FROM head"
    if order == "most_accessed":
        picks += (
            f", rest AS (SELECT id FROM {TABLE} WHERE {VISIBLE} AND id NOT IN (SELECT id FROM head) "
            f"ORDER BY access_count DESC, updated_at DESC, id DESC LIMIT {RECALL_LIMIT - head})"
        )
        chosen += " UNION ALL SELECT id FROM rest"
    return (
        f"{lock}; {picks} UPDATE {TABLE} SET access_count = access_count + 1, last_accessed_at = CASE WHEN "
        f"last_accessed_at IS NULL OR last_accessed_at < %(stale_before)s THEN %(now)s "
        f"ELSE last_accessed_at END WHERE id IN ({chosen}) RETURNING {COLS}"
    )


# --- Upsert and its history event ----------------------------------------------------------------------

# Parameters: user, key, value (JSON text), text, key_folded and text_folded (their str.casefold()),
# category, agent, group_ids (JSON text), conflicted, at.
UPSERT = (
    f"INSERT INTO {TABLE} (user_id, key, value, value_text, key_folded, text_folded, category, visibility, "
    f"source_agent_id, group_ids, source_conversation_id, conflicted, access_count, created_at, updated_at, "
    f"last_accessed_at) VALUES (%(user)s, %(key)s, %(value)s::jsonb, %(text)s, %(key_folded)s, "
    f"%(text_folded)s, %(category)s, 'self', %(agent)s, "
    f"%(group_ids)s::jsonb, NULL, %(conflicted)s, 0, %(at)s, %(at)s, NULL) "
    f"ON CONFLICT (user_id, key, source_agent_id) WHERE NOT (visibility = 'global') DO UPDATE SET "
    f"value = excluded.value, value_text = excluded.value_text, text_folded = excluded.text_folded, "
    f"category = excluded.category, "
    f"group_ids = excluded.group_ids, source_conversation_id = excluded.source_conversation_id, "
    f"conflicted = excluded.conflicted, updated_at = excluded.updated_at, "
    f"visibility = excluded.visibility RETURNING id"
)
_EVENT_COLUMNS = (
    "entry_id, user_id, key, action, actor_type, actor_id, key_prefix, old_value, new_value, owner, "
    "old_visibility, old_group_ids, visibility, group_ids, created_at"
)
_EVENT_VALUES = (  # every column after entry_id
    "%(user)s, %(key)s, %(action)s, 'agent', %(agent)s, '', NULL, %(value)s::jsonb, %(agent)s, "
    "'self', '[]', 'self', '[]', %(at)s"
)
# Parameters: entry_id, user, key, action, agent, value (JSON text), at.
EVENT = f"INSERT INTO usermemory_memoryevent ({_EVENT_COLUMNS}) VALUES (%(entry_id)s, {_EVENT_VALUES})"
# One statement writes the entry and its event, as the platform's single upsert does.
# Parameters: UPSERT's and action.
UPSERT_WITH_EVENT = (
    f"WITH up AS ({UPSERT}), event AS (INSERT INTO usermemory_memoryevent ({_EVENT_COLUMNS}) "
    f"SELECT id, {_EVENT_VALUES} FROM up) SELECT id FROM up"
)


# --- Search --------------------------------------------------------------------------------------------

# One user's visible entries whose casefolded key or value holds the casefolded query as a literal substring.
# Parameters: user, agent, folded (the query's str.casefold()).
SEARCH_PER_USER = (
    f"SELECT {COLS} FROM {TABLE} WHERE {VISIBLE} "
    f"AND (strpos(key_folded, %(folded)s) > 0 OR strpos(text_folded, %(folded)s) > 0) "
    f"ORDER BY updated_at DESC, id DESC LIMIT {PAGE_LIMIT}"
)
# The admin's full-text search across all users (every word, each also as a prefix), on the expression of
# the GIN index memory_fulltext_idx. Parameters: tsquery (from fulltext_terms).
SEARCH_ALL_USERS = (
    f"SELECT {COLS} FROM {TABLE} WHERE to_tsvector('simple'::regconfig, COALESCE(key, '') || ' ' || "
    f"COALESCE(value_text, '')) @@ to_tsquery('simple'::regconfig, %(tsquery)s) "
    f"ORDER BY updated_at DESC, id DESC LIMIT {PAGE_LIMIT}"
)


def fulltext_terms(query: str) -> str:
    """The query's words (letters and digits), each a quoted prefix lexeme, ANDed: ``'word':* & ...``."""
    return " & ".join(f"'{word}':*" for word in dict.fromkeys(re.findall(r"[^\W_]+", query.lower())))


# --- Conversation append -------------------------------------------------------------------------------

# Parameters: conversation.
LOCK_CONVERSATION = "SELECT next_seq FROM conversations_conversation WHERE id = %(conversation)s FOR UPDATE"
# Parameters: id, conversation, seq, content (JSON text), at.
INSERT_MESSAGE = (
    "INSERT INTO conversations_message (id, conversation_id, seq, channel, role, agent_id, memory_epoch, "
    "content, session_id, created_at) "
    "VALUES (%(id)s, %(conversation)s, %(seq)s, 'history', 'user', NULL, NULL, %(content)s::jsonb, 'bench', "
    "%(at)s)"
)
# Parameters: conversation.
BUMP_CONVERSATION = (
    "UPDATE conversations_conversation SET next_seq = next_seq + 1 WHERE id = %(conversation)s"
)


# --- GDPR erasure --------------------------------------------------------------------------------------

# Each takes: user.
ERASE_DELETES = tuple(
    f"DELETE FROM {table} WHERE user_id = %(user)s"
    for table in ("usermemory_memoryentrygroup", TABLE, "usermemory_memoryevent", "usermemory_turnwritecount")
)
# Parameters: user, at.
ERASED_EVENT = (
    f"INSERT INTO usermemory_memoryevent ({_EVENT_COLUMNS}) "
    "VALUES (NULL, %(user)s, '', 'erased', 'key', 'admin', '', NULL, NULL, '', 'self', '[]', 'self', '[]', "
    "%(at)s)"
)


# --- The bench's own reads (not the platform's statements) ---------------------------------------------

AGENT_GROUPS = "SELECT agentgroup_id FROM apikeys_agentgroup_members WHERE agent_id = %(agent)s ORDER BY 1"
USER_SIZES = f"SELECT user_id, count(*) FROM {TABLE} GROUP BY user_id ORDER BY 2, 1"
AGENT_OWN_KEYS = (  # Parameters: agent, users (a list).
    f"SELECT user_id, key FROM {TABLE} WHERE source_agent_id = %(agent)s AND visibility = 'self' "
    f"AND user_id = ANY(%(users)s) ORDER BY id"
)
COUNT_ENTRIES = f"SELECT count(*) FROM {TABLE}"
USER_TEXTS = f"SELECT value_text FROM {TABLE} WHERE user_id = %(user)s"  # Parameters: user.
