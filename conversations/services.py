"""Every write of conversation memory: create, append (one or a batch of at most 20, all or nothing), memory
sync with epochs, case-log checkpoints, the agent context, and GDPR erasure and export.

Messages are numbered while the conversation row is locked (``SELECT ... FOR UPDATE``) and the lock is held
until commit, so numbers follow commit order: a reader that has seen N never misses a message that commits
later with a smaller number. A message's ``seq`` counts its scope only (the history, the case log, or its
agent's memory stream), so the numbers an agent sees count no message it cannot see; its ``position`` counts
all (:mod:`conversations.models`).
"""

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from django.db import transaction
from django.utils import timezone

from apikeys.caller import Caller
from apikeys.models import AgentGroup
from apikeys.services import caller_require_writer
from conversations import selectors, store
from conversations.embedding import message_embeddings_schedule
from conversations.models import Channel, Checkpoint, Conversation, Message, MessageRole
from memoryplatform.batches import batch_size_check
from memoryplatform.embeddings import one_embedding_per_query
from memoryplatform.errors import BadRequest, Forbidden, NotFound
from usermemory.ranking import RankedSearch
from usermemory.services import memory_recall, memory_recall_ranked
from usermemory.sql.base import AnyEntry
from usermemory.sql.search import NO_FILTERS, Filters

MAX_BATCH = 20
MAX_SYNC = 1000
MAX_BLOCKS = 100
MAX_CONTEXT_MEMORY = 1000
CONTEXT_HISTORY = 50
CONTEXT_CASE_LOG = 200
# With a query: at most this many earlier messages most relevant to it.
CONTEXT_RELEVANT = 10


# --- Inputs and outputs ------------------------------------------------------------------------------


@dataclass(frozen=True)
class MessageWrite:
    channel: str
    role: str
    content: list[dict[str, Any]]
    session_id: str | None = None
    memory_epoch: int | None = None


@dataclass(frozen=True)
class SyncMessage:
    role: str
    content: list[dict[str, Any]]


@dataclass
class SyncResult:
    memory_epoch: int | None
    no_op: bool
    epoch_incremented: bool
    messages: list[store.MessageRow] = field(default_factory=list)


@dataclass
class AgentContext:
    conversation: Conversation
    agent_id: str
    memory_epoch: int | None
    memory: list[store.MessageRow]
    checkpoint: Checkpoint | None
    case_log: selectors.Page[store.MessageRow]
    history: list[store.MessageRow]
    user_memories: Sequence[AnyEntry]  # rows of a plain recall; with a query, the ranked entries
    # With a query: the same user memories best first, with their scores and the search's fallback.
    ranked_memories: RankedSearch | None = None
    # With a query: the conversation's messages most relevant to it that the context does not hold already.
    relevant_messages: selectors.MessageSearch | None = None


# --- Rules ---------------------------------------------------------------------------------------------


def _require_agent(caller: Caller, what: str) -> str:
    if not caller.is_agent:
        raise Forbidden(f"{what} is an agent's own: it needs an agent key.")
    return caller.acting_agent_id


def _where(index: int, count: int) -> str:
    return f"messages[{index}]: " if count > 1 else ""


def _check_content(content: Any, *, where: str, index: int) -> None:
    """Content is a non-empty list of blocks, each an object with a string ``type``."""
    if not isinstance(content, list) or not content:
        raise BadRequest(f"{where}content must be a non-empty list of blocks.", details={"index": index})
    if len(content) > MAX_BLOCKS:
        raise BadRequest(f"{where}content holds at most {MAX_BLOCKS} blocks.", details={"index": index})
    for block in content:
        if not isinstance(block, dict) or not isinstance(block.get("type"), str) or not block["type"]:
            raise BadRequest(
                f"{where}every content block is an object with a string 'type'.", details={"index": index}
            )


def _check_session(session_id: str | None, *, where: str = "", index: int = 0) -> None:
    """``sessionId`` is optional on every write (ADR 0023: nullable, stored when given), never blank."""
    if session_id is not None and not session_id.strip():
        raise BadRequest(f"{where}sessionId, when given, must not be blank.", details={"index": index})


def _check_write(write: MessageWrite, *, index: int, count: int) -> None:
    where = _where(index, count)
    if write.channel not in Channel.values:
        raise BadRequest(
            f"{where}channel must be one of {', '.join(Channel.values)}.", details={"index": index}
        )
    if write.role not in MessageRole.values:
        raise BadRequest(
            f"{where}role must be one of {', '.join(MessageRole.values)}.", details={"index": index}
        )
    _check_session(write.session_id, where=where, index=index)
    if write.memory_epoch is not None and write.channel != Channel.MEMORY:
        raise BadRequest(f"{where}memoryEpoch applies to the memory channel only.", details={"index": index})
    if write.memory_epoch is not None and write.memory_epoch < 1:
        raise BadRequest(f"{where}memoryEpoch must be a positive integer.", details={"index": index})
    _check_content(write.content, where=where, index=index)


def _attribution(caller: Caller, write: MessageWrite) -> str | None:
    """The agent a message is attributed to, from the key only (seed 000, "Message Creation Rules").

    - An agent key: always that agent, whatever the channel and role (a ``user`` message it relays too).
    - ``memory``: an agent's own stream, so other roles get 403.
    - Only admin keys and staff write without an author: ``user`` and ``system`` messages; ``assistant``
      and ``tool`` messages need an agent key.
    """
    if caller.is_agent:
        return caller.agent_id
    if write.channel == Channel.MEMORY:
        return _require_agent(caller, "The memory channel")
    if write.role in (MessageRole.USER, MessageRole.SYSTEM):
        return None
    raise Forbidden(f"{write.role} messages need an agent key: they are attributed to the agent.")


def _lock_conversation(*, caller: Caller, conversation_id: str) -> tuple[UUID, int]:
    """The conversation's id and next position, its row locked until commit, if the caller may take part in
    it (else 404, as unknown)."""
    pk = selectors.uuid_or_none(conversation_id)
    member = caller.acting_agent_id if caller.is_agent else None
    next_position = None if pk is None else store.conversation_lock(conversation_id=pk, member=member)
    if pk is None or next_position is None:
        raise NotFound(f"No conversation '{conversation_id}'.")
    return pk, next_position


def _insert(*, conversation: tuple[UUID, int], drafts: list[store.MessageDraft]) -> list[store.MessageRow]:
    """Number the messages (each in its scope, and their positions from the locked conversation's counter)
    and insert them in one statement, which moves the counter; their vectors follow the commit."""
    conversation_id, next_position = conversation
    messages = store.messages_insert(
        conversation_id=conversation_id, first_position=next_position, drafts=drafts, now=timezone.now()
    )
    message_embeddings_schedule(messages=messages)  # after the commit, off the statements
    return messages


# --- Conversations and messages -------------------------------------------------------------------------


@transaction.atomic
def conversation_create(
    *, caller: Caller, user_id: str, title: str = "", group_id: str | None = None
) -> Conversation:
    """A new conversation with a user. An agent key may only name a group it is a member of."""
    caller_require_writer(caller)
    if not user_id or not user_id.strip():
        raise BadRequest("userId is required.")
    if group_id:
        group = AgentGroup.objects.filter(id=group_id).first()
        if caller.is_agent and (group is None or not group.members.filter(id=caller.agent_id).exists()):
            raise Forbidden(f"Agent '{caller.agent_id}' is not a member of group '{group_id}'.")
        if group is None:
            raise BadRequest(f"No group '{group_id}'.")
    return Conversation.objects.create(user_id=user_id, title=title, group_id=group_id or None)


def message_batch_check(*, count: int) -> None:
    """A batch holds 1 to ``MAX_BATCH`` messages. Doors call it before parsing them, to refuse early."""
    batch_size_check(
        count=count, most=MAX_BATCH, items="messages", empty="A batch holds at least one message."
    )


@transaction.atomic
def message_append(
    *, caller: Caller, conversation_id: str, writes: Sequence[MessageWrite]
) -> list[store.MessageRow]:
    """Append one message or a batch of at most 20, all or nothing, attributed from the key.

    A memory message goes to the caller's latest epoch (1 for its first), or to ``memoryEpoch`` when given,
    which may be the latest or the next one (starting a new epoch), never an older one.
    """
    caller_require_writer(caller)
    message_batch_check(count=len(writes))
    for index, write in enumerate(writes):
        _check_write(write, index=index, count=len(writes))
    conversation = _lock_conversation(caller=caller, conversation_id=conversation_id)
    latest: int | None = None
    latest_known = False
    rows = []
    for index, write in enumerate(writes):
        agent_id = _attribution(caller, write)
        epoch = None
        if write.channel == Channel.MEMORY:
            if not latest_known:
                latest = selectors.memory_latest_epoch(
                    conversation=conversation[0], agent_id=_require_agent(caller, "The memory channel")
                )
                latest_known = True
            low, high = (latest or 1), (latest or 0) + 1
            epoch = write.memory_epoch or low
            if not low <= epoch <= high:
                allowed = str(low) if low == high else f"{low} or {high}"
                raise BadRequest(
                    f"{_where(index, len(writes))}memoryEpoch must be {allowed}.", details={"index": index}
                )
            latest = epoch
        rows.append(
            store.MessageDraft(
                channel=write.channel,
                role=write.role,
                agent_id=agent_id,
                memory_epoch=epoch,
                content=write.content,
                session_id=write.session_id,
            )
        )
    return _insert(conversation=conversation, drafts=rows)


@transaction.atomic
def memory_sync(
    *, caller: Caller, conversation_id: str, messages: Sequence[SyncMessage], session_id: str | None = None
) -> SyncResult:
    """memory-service's sync of the caller's memory stream with the client's full ChatMemory:

    - the same messages as the latest epoch: a no-op;
    - the stored messages are a prefix of the incoming ones: only the delta is appended to that epoch;
    - otherwise a new epoch starts with all the incoming messages.
    """
    caller_require_writer(caller)
    agent_id = _require_agent(caller, "The memory channel")
    if not messages:
        raise BadRequest("messages must not be empty.")
    if len(messages) > MAX_SYNC:
        raise BadRequest(f"A sync holds at most {MAX_SYNC} messages; got {len(messages)}.")
    _check_session(session_id)
    for index, message in enumerate(messages):
        if message.role not in MessageRole.values:
            raise BadRequest(
                f"messages[{index}]: role must be one of {', '.join(MessageRole.values)}.",
                details={"index": index},
            )
        _check_content(message.content, where=f"messages[{index}]: ", index=index)
    conversation = _lock_conversation(caller=caller, conversation_id=conversation_id)
    latest = selectors.memory_latest_epoch(conversation=conversation[0], agent_id=agent_id)
    incoming = [(m.role, m.content) for m in messages]
    stored: list[tuple[str, Any]] = []
    if latest is not None:
        stored = [
            tuple(row)
            for row in Message.objects.filter(
                conversation_id=conversation[0],
                channel=Channel.MEMORY,
                agent_id=agent_id,
                memory_epoch=latest,
            )
            .order_by("seq")
            .values_list("role", "content")
        ]
    if latest is not None and stored == incoming:
        return SyncResult(memory_epoch=latest, no_op=True, epoch_incremented=False)
    if latest is not None and len(stored) < len(incoming) and incoming[: len(stored)] == stored:
        epoch, delta, incremented = latest, messages[len(stored) :], False
    else:
        epoch, delta, incremented = (latest or 0) + 1, messages, latest is not None
    rows = [
        store.MessageDraft(
            channel=Channel.MEMORY,
            role=m.role,
            agent_id=agent_id,
            memory_epoch=epoch,
            content=m.content,
            session_id=session_id,
        )
        for m in delta
    ]
    created = _insert(conversation=conversation, drafts=rows)
    return SyncResult(memory_epoch=epoch, no_op=False, epoch_incremented=incremented, messages=created)


# --- Case log ---------------------------------------------------------------------------------------------


@transaction.atomic
def checkpoint_set(*, caller: Caller, conversation_id: str, last_entry_id: str) -> Checkpoint:
    """Store the caller's last read case-log entry (a ``summary`` message of this conversation).

    The checkpoint is set as given, so an agent may also move it back to re-read.
    """
    caller_require_writer(caller)
    agent_id = _require_agent(caller, "A checkpoint")
    conversation = selectors.conversation_get_for(caller=caller, conversation_id=conversation_id)
    pk = selectors.parse_uuid(last_entry_id, what="lastEntryId")
    seq = (
        Message.objects.filter(conversation=conversation, pk=pk, channel=Channel.SUMMARY)
        .values_list("seq", flat=True)
        .first()
    )
    if seq is None:
        raise BadRequest(f"lastEntryId '{last_entry_id}' is not a case-log entry of this conversation.")
    checkpoint = Checkpoint(
        conversation=conversation,
        agent_id=agent_id,
        last_message_id=pk,
        last_seq=seq,
        updated_at=timezone.now(),
    )
    Checkpoint.objects.bulk_create(
        [checkpoint],
        update_conflicts=True,
        unique_fields=["conversation", "agent"],
        update_fields=["last_message_id", "last_seq", "updated_at"],
    )
    return checkpoint


# --- Agent context ----------------------------------------------------------------------------------------


def _context_head(
    *, caller: Caller, conversation_id: str, agent_id: str | None
) -> tuple[str, store.ContextHead]:
    """The agent a context is read for, and the conversation (404 if the caller may not take part in it, or
    unknown, before any refusal of the agent named) with that agent's latest epoch and checkpoint."""
    try:
        agent = selectors.reading_agent_id(caller=caller, agent_id=agent_id, required=True)
    except (BadRequest, Forbidden, NotFound):
        selectors.conversation_get_for(caller=caller, conversation_id=conversation_id)  # a 404 comes first
        raise
    pk = selectors.uuid_or_none(conversation_id)
    member = caller.acting_agent_id if caller.is_agent else None
    head = None if pk is None else store.context_head(conversation_id=pk, member=member, agent_id=agent)
    if head is None:
        raise NotFound(f"No conversation '{conversation_id}'.")
    return agent, head


def conversation_context(
    *,
    caller: Caller,
    conversation_id: str,
    agent_id: str | None = None,
    history_limit: int = CONTEXT_HISTORY,
    case_log_limit: int = CONTEXT_CASE_LOG,
    query: str | None = None,
    min_score: float | None = None,
    filters: Filters = NO_FILTERS,
) -> AgentContext:
    """An agent's context in one call: its latest memory epoch, the case log after its checkpoint, its
    isolated history (the latest ``history_limit`` messages, in order) and the user memories visible to it,
    recalled with its policy's order and limit in the conversation's group (which counts their access).

    With ``query``, the user memories are recalled by relevance to it instead (hybrid,
    :func:`usermemory.services.memory_recall_ranked`): the same entries may take part, within the same
    limit, best first, with their scores in ``ranked_memories``; and ``relevant_messages`` adds at most
    ``CONTEXT_RELEVANT`` messages of the conversation the agent may read that the context does not hold
    (earlier history, older case log), best first, each scoring at least ``min_score``
    (:func:`conversations.selectors.messages_relevant_in`); the memories are narrowed by ``filters``."""
    agent, head = _context_head(caller=caller, conversation_id=conversation_id, agent_id=agent_id)
    conversation, latest, checkpoint = head
    selectors.page_limit_check(case_log_limit)
    messages = store.context_messages(
        conversation_id=conversation.id,
        agent_id=agent,
        epoch=latest,
        after_seq=checkpoint.last_seq if checkpoint is not None else 0,
        memory_limit=MAX_CONTEXT_MEMORY,
        case_limit=case_log_limit + 1,  # one more tells that more follow
        history_limit=history_limit,
    )
    memory = messages.memory
    history = messages.history[::-1]
    case_log_page = selectors.page_of_rows(messages.case_log, limit=case_log_limit)
    recall_scope: dict[str, Any] = {
        "caller": caller,
        "user_id": conversation.user_id,
        "agent_id": agent,
        "group_ids": [conversation.group_id] if conversation.group_id else None,
    }
    ranked = relevant = None
    user_memories: Sequence[AnyEntry]
    if query is None:
        user_memories = memory_recall(**recall_scope)
    else:
        with one_embedding_per_query():  # memories and messages ranked by one vector of the query
            ranked = memory_recall_ranked(query=query, min_score=min_score, filters=filters, **recall_scope)
            relevant = selectors.messages_relevant_in(
                conversation=conversation,
                agent_id=agent,
                query=query,
                given=history + case_log_page.items,
                limit=CONTEXT_RELEVANT,
                min_score=min_score,
            )
        user_memories = [scored.entry for scored in ranked.entries]
    return AgentContext(
        conversation=conversation,
        agent_id=agent,
        memory_epoch=latest,
        memory=memory,
        checkpoint=checkpoint,
        case_log=case_log_page,
        history=history,
        user_memories=user_memories,
        ranked_memories=ranked,
        relevant_messages=relevant,
    )


# --- GDPR ---------------------------------------------------------------------------------------------------


@transaction.atomic
def conversation_erase_user(user_id: str) -> dict[str, int]:
    """Every conversation of the user, with its messages (all channels, the case log too) and checkpoints.

    Registered with ``usermemory.services.register_user_data``, so admin-only erasure runs it.
    """
    messages_deleted, _ = Message.objects.filter(conversation__user_id=user_id).delete()
    checkpoints_deleted, _ = Checkpoint.objects.filter(conversation__user_id=user_id).delete()
    _, per_model = Conversation.objects.filter(user_id=user_id).delete()
    return {
        "conversationsDeleted": per_model.get(Conversation._meta.label, 0),
        "messagesDeleted": messages_deleted,
        "checkpointsDeleted": checkpoints_deleted,
    }
