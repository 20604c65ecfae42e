"""Hand-written SQL of conversations: an agent's context (its head and its messages, read as light rows),
message vectors (which are missing or stale, and the vectors written) and the ranked search over messages by
meaning and words.

The text of a message's vector (:data:`_EMBEDDING_TEXT`) is written here in SQL, with its SHA-256, so that
"missing or stale" is one set-based statement, as for memory entries (:mod:`usermemory.sql.vectors`).
"""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any, NamedTuple
from uuid import UUID, uuid4

from django.db import connection
from django.db.models import Field
from psycopg import sql
from psycopg.types.json import Jsonb

from apikeys.models import AgentGroup
from conversations.models import Channel, Checkpoint, Conversation, Message, MessageEmbedding
from memoryplatform import ranked
from memoryplatform.embeddings.jobs import PendingText
from memoryplatform.ranked import Ranking
from memoryplatform.store import instances_from_rows, query_text, tuples_from_rows

MESSAGE = sql.Identifier(Message._meta.db_table)
CONVERSATION = sql.Identifier(Conversation._meta.db_table)
CHECKPOINT = sql.Identifier(Checkpoint._meta.db_table)
EMBEDDING = sql.Identifier(MessageEmbedding._meta.db_table)
_MEMBERS = AgentGroup.members.through._meta
MEMBERS = sql.Identifier(_MEMBERS.db_table)
MEMBER_GROUP = sql.Identifier(_MEMBERS.get_field("agentgroup").column)
MEMBER_AGENT = sql.Identifier(_MEMBERS.get_field("agent").column)

# --- An agent's context ----------------------------------------------------------------------------------


class MessageRow(NamedTuple):
    """A message as the context reads it: the columns an answer shows, JSON decoded, as a tuple, not a model
    instance (building one per message was most of a context's Python CPU: ``bench/RESULTS.md``, session
    17). Its fields are named as :class:`Message`'s attributes, so what renders a message renders either."""

    id: UUID
    conversation_id: UUID
    seq: int
    channel: str
    role: str
    agent_id: str | None
    memory_epoch: int | None
    content: list[dict[str, Any]]
    session_id: str | None
    created_at: datetime


# What a read of messages may hand on to an answer: model instances, or rows.
AnyMessage = Message | MessageRow

_MESSAGE_FIELD = {f.attname: f for f in Message._meta.concrete_fields}
_ROW_FIELDS = tuple(_MESSAGE_FIELD[name] for name in MessageRow._fields)  # a renamed field fails at import
_ROW_COLUMNS = sql.SQL(", ").join([sql.Identifier("m", str(f.column)) for f in _ROW_FIELDS])
_CONVERSATION_FIELDS = tuple(f for f in Conversation._meta.concrete_fields if isinstance(f, Field))
_CHECKPOINT_FIELDS = tuple(
    f for f in Checkpoint._meta.concrete_fields if f.name in ("last_message_id", "last_seq", "updated_at")
)


def _takes_part(agent: str) -> sql.Composed:
    """Whether the agent of placeholder ``agent`` (an agent key's; NULL for viewer and admin keys) may take
    part in conversation ``c``: it has no group, or a group the agent is a member of (the rule of
    selectors.conversation_queryset_for, for every hand-written read and write of a conversation)."""
    return sql.SQL(
        """({agent}::text IS NULL OR c.group_id IS NULL OR EXISTS (
        SELECT FROM {members} g WHERE g.{member_group} = c.group_id AND g.{member_agent} = {agent}))"""
    ).format(
        agent=sql.Placeholder(agent), members=MEMBERS, member_group=MEMBER_GROUP, member_agent=MEMBER_AGENT
    )


_TAKES_PART = _takes_part("member")

# The conversation if %(member)s may take part in it, with %(agent)s's latest memory epoch and its case-log
# checkpoint.
_CONTEXT_HEAD = sql.SQL(
    """SELECT {conversation_columns},
        (SELECT max(m.memory_epoch) FROM {message} m
            WHERE m.conversation_id = c.id AND m.channel = 'memory' AND m.agent_id = %(agent)s),
        {checkpoint_columns}
    FROM {conversation} c LEFT JOIN {checkpoint} k ON k.conversation_id = c.id AND k.agent_id = %(agent)s
    WHERE c.id = %(conversation)s AND {takes_part}"""
).format(
    takes_part=_TAKES_PART,
    conversation_columns=sql.SQL(", ").join(
        [sql.Identifier("c", str(f.column)) for f in _CONVERSATION_FIELDS]
    ),
    message=MESSAGE,
    checkpoint_columns=sql.SQL(", ").join([sql.Identifier("k", str(f.column)) for f in _CHECKPOINT_FIELDS]),
    conversation=CONVERSATION,
    checkpoint=CHECKPOINT,
)

# Three lists, each read by its own index (conv_msg_memory_idx, conv_msg_channel_seq_idx) and told apart by
# ``part``: 0, the memory stream of %(agent)s's epoch %(epoch)s (none when NULL), at most %(memory_limit)s;
# 1, the case log after sequence number %(after)s, at most %(case_limit)s; 2, the latest %(history_limit)s
# messages of the history as the agent sees them (seed 004: every user message, those with no author, its
# own), newest first.
_CONTEXT_MESSAGES = sql.SQL(
    """(SELECT 0 AS part, {columns} FROM {message} m
        WHERE m.conversation_id = %(conversation)s AND m.channel = 'memory' AND m.agent_id = %(agent)s
            AND m.memory_epoch = %(epoch)s
        ORDER BY m.seq LIMIT %(memory_limit)s)
    UNION ALL
    (SELECT 1, {columns} FROM {message} m
        WHERE m.conversation_id = %(conversation)s AND m.channel = 'summary' AND m.seq > %(after)s
        ORDER BY m.seq LIMIT %(case_limit)s)
    UNION ALL
    (SELECT 2, {columns} FROM {message} m
        WHERE m.conversation_id = %(conversation)s AND m.channel = 'history'
            AND (m.role = 'user' OR m.agent_id IS NULL OR m.agent_id = %(agent)s)
        ORDER BY m.seq DESC LIMIT %(history_limit)s)"""
).format(columns=_ROW_COLUMNS, message=MESSAGE)


class ContextHead(NamedTuple):
    conversation: Conversation
    latest_epoch: int | None
    checkpoint: Checkpoint | None


class ContextMessages(NamedTuple):
    memory: list[MessageRow]
    case_log: list[MessageRow]
    history: list[MessageRow]  # newest first


def context_head(*, conversation_id: UUID, member: str | None, agent_id: str) -> ContextHead | None:
    """The conversation, if ``member`` may take part in it (``None``: any key that is not an agent's), with
    ``agent_id``'s latest memory epoch and checkpoint; ``None`` when there is no such conversation. One
    statement."""
    params = {"conversation": conversation_id, "member": member, "agent": agent_id}
    with connection.cursor() as cursor:
        cursor.execute(query_text(_CONTEXT_HEAD), params)
        row = cursor.fetchone()
    if row is None:
        return None
    width = len(_CONVERSATION_FIELDS)
    conversation = instances_from_rows(Conversation, _CONVERSATION_FIELDS, [row[:width]])[0]
    latest, mark = row[width], row[width + 1 :]
    checkpoint = None
    if mark[0] is not None:
        checkpoint = instances_from_rows(Checkpoint, _CHECKPOINT_FIELDS, [mark])[0]
        checkpoint.conversation_id = conversation.id
        checkpoint.agent_id = agent_id
    return ContextHead(conversation, latest, checkpoint)


def context_messages(
    *,
    conversation_id: UUID,
    agent_id: str,
    epoch: int | None,
    after_seq: int,
    memory_limit: int,
    case_limit: int,
    history_limit: int,
) -> ContextMessages:
    """The messages of an agent's context, in one statement (:data:`_CONTEXT_MESSAGES`)."""
    params: dict[str, Any] = {
        "conversation": conversation_id,
        "agent": agent_id,
        "epoch": epoch,
        "after": after_seq,
        "memory_limit": memory_limit,
        "case_limit": case_limit,
        "history_limit": history_limit,
    }
    with connection.cursor() as cursor:
        cursor.execute(query_text(_CONTEXT_MESSAGES), params)
        rows = cursor.fetchall()
    parts: tuple[list[MessageRow], list[MessageRow], list[MessageRow]] = ([], [], [])
    for part, message in zip(
        (r[0] for r in rows),
        tuples_from_rows(MessageRow._make, _ROW_FIELDS, [r[1:] for r in rows]),
        strict=True,
    ):
        parts[part].append(message)
    return ContextMessages(*parts)


# --- Appending messages ----------------------------------------------------------------------------------


class MessageDraft(NamedTuple):
    """A message to append, its author and epoch decided; its id, number and time are given as it is
    inserted."""

    channel: str
    role: str
    agent_id: str | None
    memory_epoch: int | None
    content: list[dict[str, Any]]
    session_id: str | None


# The conversation's next position, its row locked until commit, if %(member)s may take part in it.
_LOCK = sql.SQL(
    """SELECT c.next_position FROM {conversation} c
    WHERE c.id = %(conversation)s AND {takes_part} FOR UPDATE OF c"""
).format(conversation=CONVERSATION, takes_part=_TAKES_PART)

# The messages in their order: positions from %(first)s; each scope's numbers (``seq``: a shared channel's,
# or the memory stream of the message's agent) after the scope's last, read through the scope's unique index
# (conv_message_shared_seq_uniq, conv_message_memory_seq_uniq; each branch's condition names its index's).
# The conversation's counter moves past the positions. Returns each message's id and number.
_INSERT = sql.SQL(
    """WITH given AS (
        SELECT g.*, CASE WHEN g.channel = 'memory' THEN g.agent END AS owner
        FROM unnest(%(ids)s::uuid[], %(channels)s::text[], %(roles)s::text[], %(agents)s::text[],
            %(epochs)s::integer[], %(contents)s::jsonb[], %(sessions)s::text[])
            WITH ORDINALITY AS g(id, channel, role, agent, epoch, content, session, ord)
    ), n AS (
        SELECT given.*, row_number() OVER (PARTITION BY channel, owner ORDER BY ord) AS k FROM given
    ), scopes AS (
        SELECT s.channel, s.owner, coalesce(
            CASE WHEN s.owner IS NOT NULL THEN (
                SELECT max(m.seq) FROM {message} m WHERE m.conversation_id = %(conversation)s
                    AND m.channel = 'memory' AND m.agent_id = s.owner)
            ELSE (
                SELECT max(m.seq) FROM {message} m WHERE m.conversation_id = %(conversation)s
                    AND NOT (m.channel = 'memory') AND m.channel = s.channel)
            END, 0) AS last
        FROM (SELECT DISTINCT channel, owner FROM given) s
    ), added AS (
        INSERT INTO {message} ({columns}, position)
        SELECT n.id, %(conversation)s, s.last + n.k, n.channel, n.role, n.agent, n.epoch, n.content,
            n.session, %(now)s, %(first)s + n.ord - 1
        FROM n JOIN scopes s ON s.channel = n.channel AND s.owner IS NOT DISTINCT FROM n.owner
        RETURNING id, seq
    ), moved AS (
        UPDATE {conversation} SET next_position = %(first)s + %(count)s WHERE id = %(conversation)s
    )
    SELECT id, seq FROM added"""
).format(
    message=MESSAGE,
    columns=sql.SQL(", ").join([sql.Identifier(str(f.column)) for f in _ROW_FIELDS]),
    conversation=CONVERSATION,
)


def conversation_lock(*, conversation_id: UUID, member: str | None) -> int | None:
    """The conversation's next position, its row locked until the transaction ends, if ``member`` may take
    part in it (``None``: any key that is not an agent's); ``None`` when there is no such conversation.
    Every number of its messages is given under this lock."""
    with connection.cursor() as cursor:
        cursor.execute(query_text(_LOCK), {"conversation": conversation_id, "member": member})
        row = cursor.fetchone()
    return None if row is None else int(row[0])


def messages_insert(
    *, conversation_id: UUID, first_position: int, drafts: Sequence[MessageDraft], now: datetime
) -> list[MessageRow]:
    """Insert the drafts as messages placed from ``first_position``, each numbered after the last of its scope
    (:data:`_INSERT`), and move the conversation's counter past them: one statement, under the lock of
    :func:`conversation_lock`. The messages as written."""
    rows = [
        MessageRow(
            uuid4(),
            conversation_id,
            0,  # its number, given by the statement
            d.channel,
            d.role,
            d.agent_id,
            d.memory_epoch,
            d.content,
            d.session_id,
            now,
        )
        for i, d in enumerate(drafts)
    ]
    params: dict[str, Any] = {
        "conversation": conversation_id,
        "first": first_position,
        "count": len(rows),
        "now": now,
        "ids": [r.id for r in rows],
        "channels": [r.channel for r in rows],
        "roles": [r.role for r in rows],
        "agents": [r.agent_id for r in rows],
        "epochs": [r.memory_epoch for r in rows],
        "contents": [Jsonb(r.content) for r in rows],
        "sessions": [r.session_id for r in rows],
    }
    with connection.cursor() as cursor:
        cursor.execute(query_text(_INSERT), params)
        numbers = dict(cursor.fetchall())
    return [row._replace(seq=int(numbers[row.id])) for row in rows]


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
# are never edited, so a text read is never stale). The literal is parsed as ``vector`` and stored as
# ``halfvec`` (the assignment rounds each component to 16 bits; one beyond ±65504 is refused).
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


# --- Ranked search ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MessageScope:
    """Which messages a ranked search reads, applied in its statement before any ranking.

    - ``agent``: an agent's view (``None``: every message, for viewer and admin keys): the conversations it
      may take part in (no group, or a group it is a member of), their history and case log, and of the
      memory channel only its own stream; ``isolated``, of the history only what seed 004's ``view=agent``
      shows it (every user message, those with no author, and its own).
    - Filters: ``user_id`` (whose conversations), ``author`` (the agent that wrote it), ``channels``,
      ``conversation_id``, and ``exclude`` (message ids already given).
    """

    agent: str | None
    isolated: bool = False
    user_id: str | None = None
    author: str | None = None
    channels: list[str] | None = None
    conversation_id: str | None = None
    exclude: list[str] | None = None

    def params(self) -> dict[str, Any]:
        return {
            "agent": self.agent,
            "isolated": self.isolated,
            "user": self.user_id,
            "author": self.author,
            "channels": self.channels,
            "conversation": self.conversation_id,
            "exclude": self.exclude or [],
        }


# The candidates: the messages of the scope, with their lexemes ({lexemes}) for BM25, whose statistics (count,
# average length, document frequencies) are so computed over what the caller may read, and nothing else.
_VISIBLE = """visible AS MATERIALIZED (
    SELECT m.id, {lexemes} AS vec FROM {message} m JOIN {conversation} c ON c.id = m.conversation_id
    WHERE {takes_part} AND (%(agent)s::text IS NULL OR (
            (m.channel <> 'memory' OR m.agent_id = %(agent)s)
            AND (NOT %(isolated)s OR m.channel <> 'history' OR m.role = 'user' OR m.agent_id IS NULL
                OR m.agent_id = %(agent)s)))
        AND (%(user)s::text IS NULL OR c.user_id = %(user)s)
        AND (%(author)s::text IS NULL OR m.agent_id = %(author)s)
        AND (%(channels)s::text[] IS NULL OR m.channel = ANY(%(channels)s::text[]))
        AND (%(conversation)s::uuid IS NULL OR m.conversation_id = %(conversation)s::uuid)
        AND NOT m.id = ANY(%(exclude)s::uuid[])
)"""
_STORED_LEXEMES = "m.search_vector"
_PARSED_LEXEMES = "conversations_message_document(%(config)s::regconfig, m.content)"

# Each message's vector of a model (MessageEmbedding).
VECTORS = ranked.VectorTable(EMBEDDING, sql.Identifier(MessageEmbedding._meta.get_field("message").column))

# One page, best first by the calibrated probability of relevance (:mod:`memoryplatform.ranked`), each at
# least the caller's minScore (0 by default: no cut).
_RANKED = """WITH {ctes}
SELECT id, score, cos, bm25 FROM ranked WHERE score >= %(min_score)s
ORDER BY score DESC, id LIMIT %(limit)s OFFSET %(offset)s"""


@cache
def _ranked_sql(*, semantic: bool, fulltext: bool, stored: bool) -> sql.Composed:
    candidates = sql.SQL(_VISIBLE).format(
        lexemes=sql.SQL(_STORED_LEXEMES if stored else _PARSED_LEXEMES),
        message=MESSAGE,
        conversation=CONVERSATION,
        takes_part=_takes_part("agent"),
    )
    ctes = ranked.ranked_ctes(candidates=candidates, vectors=VECTORS, semantic=semantic, fulltext=fulltext)
    return sql.SQL(_RANKED).format(ctes=ctes)


class ScoredMessageId(NamedTuple):
    """A message of a ranked search, its score (the probability of relevance, :mod:`memoryplatform.relevance`)
    and its features (``cos`` ``None`` without a vector)."""

    message_id: Any
    score: float
    cos: float | None
    bm25: float


def messages_ranked(
    *, scope: MessageScope, ranking: Ranking, limit: int, offset: int
) -> list[ScoredMessageId]:
    """One page of the scope's messages best first by ``ranking`` (semantic, full text, or both), each scoring
    at least its ``min_score``; one statement, visibility first."""
    params: dict[str, Any] = {
        **scope.params(),
        **ranked.ranking_params(ranking),
        "limit": limit,
        "offset": offset,
    }
    statement = _ranked_sql(semantic=ranking.semantic, fulltext=ranking.fulltext, stored=ranking.stored)
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        return [
            ScoredMessageId(row[0], float(row[1]), None if row[2] is None else float(row[2]), float(row[3]))
            for row in cursor.fetchall()
        ]
