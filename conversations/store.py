"""Hand-written SQL of conversations: message vectors (which are missing or stale, and the vectors written)
and the ranked search over messages by meaning and words.

The text of a message's vector (:data:`_EMBEDDING_TEXT`) is written here in SQL, with its SHA-256, so that
"missing or stale" is one set-based statement, as for memory entries (:mod:`usermemory.sql.vectors`).
"""

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db import connection
from psycopg import sql

from apikeys.models import AgentGroup
from conversations.models import Channel, Conversation, Message, MessageEmbedding
from memoryplatform.embeddings.jobs import PendingText

MESSAGE = sql.Identifier(Message._meta.db_table)
CONVERSATION = sql.Identifier(Conversation._meta.db_table)
EMBEDDING = sql.Identifier(MessageEmbedding._meta.db_table)
_MEMBERS = AgentGroup.members.through._meta
MEMBERS = sql.Identifier(_MEMBERS.db_table)
MEMBER_GROUP = sql.Identifier(_MEMBERS.get_field("agentgroup").column)
MEMBER_AGENT = sql.Identifier(_MEMBERS.get_field("agent").column)

# The channels whose messages get vectors: what the user saw, and the shared case log. An agent's memory
# stream repeats its history (seed 000's ChatMemory), so it is found by its words only.
EMBEDDED_CHANNELS = (Channel.HISTORY.value, Channel.SUMMARY.value)
# A message's text in its vector: at most its first MESSAGE_CHARS characters (the embedder reads fewer:
# EMBEDDINGS_MAX_CHARS), after the last CONTEXT_CHARS of the turn before it on its channel, as context.
MESSAGE_CHARS = 10_000
CONTEXT_CHARS = 300


def _text_of(alias: str) -> sql.Composed:
    """The text of a message's text blocks (their ``text`` strings, joined by a space)."""
    return sql.SQL(
        """array_to_string(ARRAY(SELECT jsonb_array_elements_text(
            jsonb_path_query_array({m}.content, '$[*].text ? (@.type() == "string")'))), ' ')"""
    ).format(m=sql.Identifier(alias))


# "role: text" of the message, after "role: text" of the turn before it on the same channel of the same
# conversation (seen by whoever may see the message: history and case log are whole to each participant).
_EMBEDDING_TEXT = sql.SQL(
    """CASE WHEN coalesce(p.text, '') = '' THEN ''
        ELSE p.role || ': ' || right(p.text, {context}) || E'\\n' END
    || m.role || ': ' || left(m.text, {chars})"""
).format(context=sql.Literal(CONTEXT_CHARS), chars=sql.Literal(MESSAGE_CHARS))

# Messages of the embedded channels (of %(ids)s, or all) after %(after)s, with a text, and the text to embed.
_TEXTS = sql.SQL(
    """texts AS (
    SELECT m.id, {embedding_text} AS text FROM (
        SELECT id, conversation_id, channel, seq, role, {text} AS text FROM {message} m
        WHERE channel = ANY(%(channels)s::text[])
            AND (%(after)s::uuid IS NULL OR id > %(after)s::uuid)
            AND (%(ids)s::uuid[] IS NULL OR id = ANY(%(ids)s::uuid[]))
    ) m
    LEFT JOIN LATERAL (
        SELECT p.role, {previous} AS text FROM {message} p
        WHERE p.conversation_id = m.conversation_id AND p.channel = m.channel AND p.seq < m.seq
        ORDER BY p.seq DESC LIMIT 1
    ) p ON true
    WHERE m.text <> ''
), pending AS (
    SELECT t.id, t.text FROM texts t LEFT JOIN {embedding} v ON v.message_id = t.id
    WHERE v.message_id IS NULL OR v.model <> %(model)s
        OR v.text_hash <> encode(sha256(convert_to(t.text, 'UTF8')), 'hex')
)"""
).format(
    embedding_text=_EMBEDDING_TEXT,
    text=_text_of("m"),
    previous=_text_of("p"),
    message=MESSAGE,
    embedding=EMBEDDING,
)
_PENDING = sql.SQL("WITH {texts} SELECT id::text, text FROM pending ORDER BY id LIMIT %(limit)s").format(
    texts=_TEXTS
)
_PENDING_COUNT = sql.SQL("WITH {texts} SELECT count(*) FROM pending").format(texts=_TEXTS)

# Insert, or replace a vector of another model or text; not for a message gone since it was read (messages
# are never edited, so a text read is never stale).
_WRITE = sql.SQL(
    """INSERT INTO {embedding} AS v (message_id, model, dimensions, text_hash, embedding, embedded_at)
    SELECT n.id, %(model)s, %(dimensions)s, n.text_hash, n.vector::vector, %(now)s
    FROM unnest(%(ids)s::uuid[], %(hashes)s::text[], %(vectors)s::text[]) AS n(id, text_hash, vector)
    WHERE EXISTS (SELECT FROM {message} m WHERE m.id = n.id)
    ON CONFLICT (message_id) DO UPDATE SET model = EXCLUDED.model, dimensions = EXCLUDED.dimensions,
        text_hash = EXCLUDED.text_hash, embedding = EXCLUDED.embedding, embedded_at = EXCLUDED.embedded_at
    WHERE (v.model, v.text_hash) IS DISTINCT FROM (EXCLUDED.model, EXCLUDED.text_hash)"""
).format(embedding=EMBEDDING, message=MESSAGE)


def _pending_params(*, model: str, ids: Sequence[str] | None, after: str | None) -> dict[str, Any]:
    return {
        "model": model,
        "ids": [str(i) for i in ids] if ids is not None else None,
        "after": after,
        "channels": list(EMBEDDED_CHANNELS),
    }


def message_vectors_pending(
    *, model: str, ids: Sequence[str] | None, after: str | None, limit: int
) -> list[PendingText]:
    """History and case-log messages with text (of ``ids``, or all) after ``after`` (none: from the first)
    whose vector is missing, of another model, or of another text, in id order, with the text to embed."""
    params = {**_pending_params(model=model, ids=ids, after=after), "limit": limit}
    with connection.cursor() as cursor:
        cursor.execute(_PENDING, params)
        return [PendingText(message_id, text) for message_id, text in cursor.fetchall()]


def message_vectors_pending_count(model: str) -> int:
    """How many messages :func:`message_vectors_pending` would return in all."""
    with connection.cursor() as cursor:
        cursor.execute(_PENDING_COUNT, _pending_params(model=model, ids=None, after=None))
        return int(cursor.fetchone()[0])


def message_vectors_write(
    *,
    model: str,
    dimensions: int,
    ids: list[str],
    text_hashes: list[str],
    vectors: list[str],
    now: datetime,
) -> int:
    """Store vectors (pgvector text literals) of these messages' texts: insert, or replace a vector of another
    model or text (ON CONFLICT, so concurrent writers need no check first); none for a message gone. Returns
    the rows written."""
    params: dict[str, Any] = {
        "model": model,
        "dimensions": dimensions,
        "ids": [str(i) for i in ids],
        "hashes": text_hashes,
        "vectors": vectors,
        "now": now,
    }
    with connection.cursor() as cursor:
        cursor.execute(_WRITE, params)
        return cursor.rowcount
