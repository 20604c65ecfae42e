"""Reads of conversations. Every read goes through :func:`conversation_queryset_for`, so group gating holds
for get, list, checkpoint and context alike, and the memory channel is always scoped to one agent."""

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, Literal, NamedTuple, TypeVar, overload

from django.conf import settings
from django.contrib.postgres.search import SearchQuery, SearchRank, SearchVectorField
from django.db import connection
from django.db.models import Exists, F, Max, OuterRef, Q, QuerySet
from django.db.models.expressions import RawSQL

from apikeys.caller import Caller
from apikeys.models import Agent, AgentGroup
from conversations import store
from conversations.models import Channel, Checkpoint, Conversation, Message, MessageRole
from memoryplatform.errors import BadRequest, Forbidden, NotFound
from memoryplatform.ranked import STORED_CONFIG
from memoryplatform.text import ascii_int, check_query
from usermemory.ranking import RANKED_MODES, SEARCH_MODES, search_ranking

DEFAULT_PAGE = 50
MAX_PAGE = 200
EPOCH_LATEST = "latest"
EPOCH_ALL = "all"
VIEW_AGENT = "agent"

ModelT = TypeVar("ModelT", Message, Conversation)
RowT = TypeVar("RowT", Message, Conversation, store.MessageRow)


def uuid_or_none(value: str) -> uuid.UUID | None:
    """The UUID written in ``value``, in ASCII only: Python's ``uuid.UUID`` also reads other scripts'
    digits (``"١"`` as 1), so one conversation would answer to many ids."""
    text = str(value)
    if not text.isascii():
        return None
    try:
        return uuid.UUID(text)
    except ValueError:
        return None


def parse_uuid(value: str, *, what: str) -> uuid.UUID:
    pk = uuid_or_none(value)
    if pk is None:
        raise BadRequest(f"Malformed {what}: '{value}'.")
    return pk


def _membership(agent_id: str) -> Exists:
    return Exists(
        AgentGroup.members.through.objects.filter(agentgroup_id=OuterRef("group_id"), agent_id=agent_id)
    )


def conversation_queryset_for(*, caller: Caller) -> QuerySet[Conversation]:
    """The conversations the caller may take part in: for an agent key, those without a group and those of
    its groups (``caller_is_member`` annotated); every conversation for other roles.

    A conversation an agent may not take part in is, to it, one that does not exist: its id answers the
    same 404 as an unknown one, and names no group (a 403 would confirm the conversation and its group).
    """
    qs = Conversation.objects.all()
    if caller.is_agent:
        qs = qs.annotate(caller_is_member=_membership(caller.acting_agent_id))
        return qs.filter(Q(group__isnull=True) | Q(caller_is_member=True))
    return qs


def conversation_list_for(
    *, caller: Caller, user_id: str | None = None, after: str | None = None
) -> QuerySet[Conversation]:
    """The conversations the caller may take part in (the rule of :func:`conversation_get_for`), newest
    first, optionally of one user, and after the ``after`` cursor (a conversation id) if given."""
    qs = conversation_queryset_for(caller=caller)
    if user_id is not None:
        qs = qs.filter(user_id=user_id)
    if after is not None:
        pk = parse_uuid(after, what="cursor")
        cursor = qs.filter(pk=pk).values("created_at", "id").first()
        if cursor is None:
            raise BadRequest(f"Unknown cursor '{after}': no such conversation.")
        qs = qs.filter(
            Q(created_at__lt=cursor["created_at"]) | Q(created_at=cursor["created_at"], id__lt=cursor["id"])
        )
    return qs.order_by("-created_at", "-id")


def conversation_get_for(*, caller: Caller, conversation_id: str) -> Conversation:
    """The conversation, if the caller may take part in it (one query); else 404, whether it is unknown or
    of a group the agent is not in."""
    pk = uuid_or_none(conversation_id)
    if pk is None:
        raise NotFound(f"No conversation '{conversation_id}'.")
    conversation = conversation_queryset_for(caller=caller).filter(pk=pk).first()
    if conversation is None:
        raise NotFound(f"No conversation '{conversation_id}'.")
    return conversation


@overload
def reading_agent_id(*, caller: Caller, agent_id: str | None, required: Literal[True]) -> str: ...
@overload
def reading_agent_id(*, caller: Caller, agent_id: str | None, required: bool) -> str | None: ...
def reading_agent_id(*, caller: Caller, agent_id: str | None, required: bool) -> str | None:
    """The agent a read is made for: an agent key reads as itself (naming another is 403); a viewer or admin
    names it with ``agentId`` (400 without it where one is needed)."""
    if caller.is_agent:
        if agent_id and agent_id != caller.agent_id:
            raise Forbidden(f"An agent key for '{caller.agent_id}' cannot read as agent '{agent_id}'.")
        return caller.acting_agent_id
    if not agent_id:
        if required:
            raise BadRequest("agentId is required with a viewer or admin key.")
        return None
    if not Agent.objects.filter(id=agent_id).exists():
        raise NotFound(f"No agent '{agent_id}'.")
    return agent_id


# The largest memory epoch: the column is a PositiveIntegerField (32-bit on every database).
MAX_EPOCH = 2**31 - 1


def parse_epoch(value: str | None) -> str | int:
    """``latest`` (default), ``all`` or a positive integer."""
    if value is None or value == EPOCH_LATEST:
        return EPOCH_LATEST
    if value == EPOCH_ALL:
        return EPOCH_ALL
    epoch = ascii_int(value, low=1, high=MAX_EPOCH)
    if epoch is not None:
        return epoch
    raise BadRequest(f"epoch must be 'latest', 'all' or an integer from 1 to {MAX_EPOCH}; got '{value}'.")


def memory_latest_epoch(*, conversation: Conversation | uuid.UUID, agent_id: str) -> int | None:
    return Message.objects.filter(
        conversation=conversation, channel=Channel.MEMORY, agent_id=agent_id
    ).aggregate(latest=Max("memory_epoch"))["latest"]


def message_seq_of(*, scope: QuerySet[Message], message_id: str) -> int:
    """The number of a message of ``scope`` (one channel of the conversation, or one agent's memory stream:
    the numbers of one scope), used as a cursor; 400 when it is not one of them."""
    pk = parse_uuid(message_id, what="cursor")
    seq = scope.filter(pk=pk).values_list("seq", flat=True).first()
    if seq is None:
        raise BadRequest(f"Unknown cursor '{message_id}': no such message in this list.")
    return seq


def message_list(
    *,
    caller: Caller,
    conversation: Conversation,
    channel: str = Channel.HISTORY,
    after: str | None = None,
    epoch: str | None = None,
    view: str | None = None,
    agent_id: str | None = None,
) -> QuerySet[Message]:
    """A channel's messages in sequence order, after the ``after`` cursor if given.

    - ``memory`` is always one agent's stream: the caller's, or ``agentId``'s for viewer and admin keys; the
      epoch is ``latest`` (default), ``all`` or a number.
    - ``history`` with ``view=agent`` holds every user message and only the agent's own others
      (:func:`_seen_by`); without ``view``, the whole channel: every message of every agent.
    """
    if channel not in Channel.values:
        raise BadRequest(f"channel must be one of {', '.join(Channel.values)}.")
    if view not in (None, VIEW_AGENT):
        raise BadRequest("view must be 'agent'.")
    if view and channel != Channel.HISTORY:
        raise BadRequest("view=agent applies to the history channel only.")
    if epoch is not None and channel != Channel.MEMORY:
        raise BadRequest("epoch applies to the memory channel only.")
    qs = Message.objects.filter(conversation=conversation, channel=channel).order_by("seq")
    if channel == Channel.MEMORY:
        reader = reading_agent_id(caller=caller, agent_id=agent_id, required=True)
        qs = qs.filter(agent_id=reader)  # one scope: the reader's own stream
    if after is not None:  # a number of the same scope
        qs = qs.filter(seq__gt=message_seq_of(scope=qs, message_id=after))
    if channel == Channel.MEMORY:
        wanted = parse_epoch(epoch)
        if wanted == EPOCH_LATEST:
            latest = memory_latest_epoch(conversation=conversation, agent_id=reader)
            return qs.filter(memory_epoch=latest) if latest is not None else qs.none()
        if wanted != EPOCH_ALL:
            qs = qs.filter(memory_epoch=wanted)
        return qs
    if view == VIEW_AGENT:
        reader = reading_agent_id(caller=caller, agent_id=agent_id, required=True)
        qs = qs.filter(_seen_by(reader))
    return qs


def _seen_by(agent_id: str) -> Q:
    """Seed 004's isolated history: every user message (whichever agent relayed it: it carries that agent as
    its author), the messages with no author (an admin's system message) and only this agent's own others."""
    return Q(role=MessageRole.USER) | Q(agent__isnull=True) | Q(agent_id=agent_id)


def history_for_agent(*, conversation: Conversation, agent_id: str) -> QuerySet[Message]:
    """The history channel as this agent sees it (:func:`_seen_by`)."""
    return Message.objects.filter(conversation=conversation, channel=Channel.HISTORY).filter(
        _seen_by(agent_id)
    )


@dataclass(frozen=True)
class Page(Generic[RowT]):
    items: list[RowT]
    next_cursor: str | None


def page_limit_check(limit: int) -> None:
    if not 1 <= limit <= MAX_PAGE:
        raise BadRequest(f"limit must be between 1 and {MAX_PAGE}.")


def page_of(qs: QuerySet[ModelT], *, limit: int = DEFAULT_PAGE) -> Page[ModelT]:
    """At most ``limit`` rows of an ordered queryset (one query); ``next_cursor``, the last row's id, is set
    when more follow."""
    page_limit_check(limit)
    return page_of_rows(list(qs[: limit + 1]), limit=limit)


def page_of_rows(rows: Sequence[RowT], *, limit: int) -> Page[RowT]:
    """The page of rows read with one more than ``limit`` (which tells that more follow)."""
    more = len(rows) > limit
    items = list(rows[:limit])
    return Page(items=items, next_cursor=str(items[-1].id) if more else None)


def checkpoint_get(*, conversation: Conversation, agent_id: str) -> Checkpoint | None:
    return Checkpoint.objects.filter(conversation=conversation, agent_id=agent_id).first()


def conversations_of_user(*, user_id: str) -> QuerySet[Conversation]:
    return Conversation.objects.filter(user_id=user_id).order_by("created_at", "id")


# --- Search across conversations (seed 001's search_all_conversations) --------------------------------------

MAX_SEARCH = 100


_TABLE = Message._meta.db_table


def _message_document(config: str) -> RawSQL:
    """A message's text as a ``tsvector``, computed when the message was written: ``search_vector``, which
    holds the text of its first 100,000 characters (``conversations_message_document``, migration 0003), so no
    stored message can make a search fail. With another ``SEARCH_LANGUAGE`` than ``memory_simple``, the same
    bounded document is parsed per query in that configuration."""
    table = connection.ops.quote_name(_TABLE)
    if config == STORED_CONFIG:
        return RawSQL(f"{table}.search_vector", [], output_field=SearchVectorField())  # noqa: S611
    return RawSQL(  # noqa: S611 (no caller text: the config is a parameter)
        f"conversations_message_document(%s::regconfig, {table}.content)",
        [config],
        output_field=SearchVectorField(),
    )


def _seen_by_caller(caller: Caller) -> Q:
    """The messages a key may search. An agent: those of the conversations it may take part in (any without a
    group, and those of its groups: :func:`conversation_queryset_for`), their history and case log, and of the
    memory channel only its own stream, never another agent's. Viewer and admin keys: every message."""
    if not caller.is_agent:
        return Q()
    agent_id = caller.acting_agent_id
    member = Exists(
        AgentGroup.members.through.objects.filter(
            agentgroup_id=OuterRef("conversation__group_id"), agent_id=agent_id
        )
    )
    in_conversation = Q(conversation__group__isnull=True) | Q(member)
    return in_conversation & (~Q(channel=Channel.MEMORY) | Q(agent_id=agent_id))


class ScoredMessage(NamedTuple):
    """A message of a search and its score: for ``semantic`` and ``hybrid``, the probability that it is
    relevant (:mod:`memoryplatform.relevance`); for ``keyword``, PostgreSQL's full-text rank."""

    message: Message
    score: float


class MessageSearch(NamedTuple):
    """Messages best first; ``fallback`` is "fulltext" when the embedder could not embed the query."""

    messages: list[ScoredMessage]
    fallback: str | None


def message_search(
    *,
    caller: Caller,
    query: str,
    user_id: str | None = None,
    agent_id: str | None = None,
    channel: str | None = None,
    limit: int = DEFAULT_PAGE,
    offset: int = 0,
    mode: str = "keyword",
    min_score: float | None = None,
) -> MessageSearch:
    """Search over the messages the caller may see (:func:`_seen_by_caller`), best first: of one user's
    conversations, of one agent's messages (``agent_id``, the author) or every agent's, of one channel or all.

    - ``keyword`` (the default, as before modes): the words and phrases of a web search
      (``websearch_to_tsquery``) against each message's stored document, ranked by ``ts_rank``
      (:func:`_message_fulltext`).
    - ``semantic`` and ``hybrid``: by meaning, or by meaning and words (BM25 over the caller's messages),
      each scored by the probability of relevance and at least ``min_score`` (:func:`message_search_ranked`);
      full text alone when the embedder is down (``fallback``).
    """
    if mode not in SEARCH_MODES:
        raise BadRequest(f"mode must be one of {', '.join(SEARCH_MODES)}.")
    if channel is not None and channel not in Channel.values:
        raise BadRequest(f"channel must be one of {', '.join(Channel.values)}.")
    if not 1 <= limit <= MAX_SEARCH:
        raise BadRequest(f"limit must be between 1 and {MAX_SEARCH}.")
    if mode in RANKED_MODES:
        scope = store.MessageScope(
            agent=caller.acting_agent_id if caller.is_agent else None,
            user_id=user_id,
            author=agent_id,
            channels=[channel] if channel is not None else None,
        )
        return message_search_ranked(
            scope=scope, query=query, mode=mode, limit=limit, offset=offset, min_score=min_score
        )
    if min_score is not None:
        raise BadRequest("keyword search does not score: use mode hybrid.")
    found = _message_fulltext(
        caller=caller,
        query=query,
        user_id=user_id,
        agent_id=agent_id,
        channel=channel,
        window=(offset, limit),
    )
    return MessageSearch([ScoredMessage(m, m.rank) for m in found], None)  # type: ignore[attr-defined]  # annotated


def _message_fulltext(
    *,
    caller: Caller,
    query: str,
    user_id: str | None,
    agent_id: str | None,
    channel: str | None,
    window: tuple[int, int],
) -> list[Message]:
    """Ranked full-text search, each message annotated with its ``rank``, best first (then newest). Words and
    phrases as a web search writes them (``websearch_to_tsquery``) against each message's stored document
    (:func:`_message_document`), which holds at most its first 100,000 characters."""
    check_query(query)
    config = settings.SEARCH_LANGUAGE
    words = SearchQuery(query, search_type="websearch", config=config)
    qs = Message.objects.select_related("conversation").filter(_seen_by_caller(caller))
    if user_id is not None:
        qs = qs.filter(conversation__user_id=user_id)
    if agent_id is not None:
        qs = qs.filter(agent_id=agent_id)
    if channel is not None:
        qs = qs.filter(channel=channel)
    qs = qs.annotate(document=_message_document(config))
    qs = qs.filter(document=words).annotate(rank=SearchRank(F("document"), words))
    offset, limit = window
    return list(qs.order_by("-rank", "-created_at", "-id")[offset : offset + limit])


def message_search_ranked(
    *,
    scope: store.MessageScope,
    query: str,
    mode: str,
    limit: int,
    offset: int = 0,
    min_score: float | None = None,
) -> MessageSearch:
    """The messages of ``scope`` by relevance to ``query`` (``semantic`` or ``hybrid``), as memory search
    ranks entries (:func:`usermemory.ranking.search_ranking`: the same embedder, calibration, threshold and
    fallback), best first, each with its score. Visibility and filters are applied in the same statement,
    before ranking (:func:`conversations.store.messages_ranked`). Two queries: the ranking, the messages."""
    ranking, fallback = search_ranking(
        query=query, mode=mode, window=limit + offset, min_score=min_score, user_id=scope.user_id
    )
    ranked = store.messages_ranked(scope=scope, ranking=ranking, limit=limit, offset=offset)
    if not ranked:
        return MessageSearch([], fallback)
    by_id = Message.objects.select_related("conversation").in_bulk([r.message_id for r in ranked])
    # a message erased since the ranking is left out
    found = [ScoredMessage(by_id[r.message_id], r.score) for r in ranked if r.message_id in by_id]
    return MessageSearch(found, fallback)


def messages_relevant_in(
    *,
    conversation: Conversation,
    agent_id: str,
    query: str,
    given: Sequence[store.AnyMessage],
    limit: int,
    min_score: float | None = None,
) -> MessageSearch:
    """The messages of ``conversation`` most relevant to ``query`` (hybrid) that ``agent_id`` may read and
    that are not among ``given`` (what its context already holds): its history as the agent sees it
    (:func:`_seen_by`) and the case log, best first, at most ``limit``, each scoring at least ``min_score``
    when given (no cut by default, as a recall by relevance)."""
    scope = store.MessageScope(
        agent=agent_id,
        isolated=True,
        channels=list(store.EMBEDDED_CHANNELS),
        conversation_id=str(conversation.pk),
        exclude=[str(m.id) for m in given],
    )
    return message_search_ranked(scope=scope, query=query, mode="hybrid", limit=limit, min_score=min_score)
