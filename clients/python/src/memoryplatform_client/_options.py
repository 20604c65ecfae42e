"""The options of the client's calls (keyword arguments of both clients), in snake_case: the TypeScript
client's ``options.ts`` has the same, in the server's camelCase. :mod:`memoryplatform_client._calls` turns
them into the server's field names."""

from __future__ import annotations

from datetime import datetime
from typing import Any, TypedDict

from memoryplatform_client.types import (
    Channel,
    RankedMode,
    RecallOrder,
    SearchMode,
    TaskStatus,
    Visibility,
)


class UpsertOptions(TypedDict, total=False):
    category: str
    visibility: Visibility
    source_agent_id: str
    group_ids: list[str]
    source_conversation_id: str
    turn_id: str
    valid_to: datetime | str
    """The end of validity: after it, reads no longer see the value; it stays in history."""
    ttl_seconds: int
    """The value holds this many seconds from the write (the server sets ``validTo``); reads then miss it."""
    confidence: float
    """0 to 1: how sure the writer is (an insight's, an extracted fact's)."""
    source: str
    """Where the value came from: ``user_correction``, ``observed_pattern``, ``task_outcome``, ``extracted``,
    or free text."""
    observed_at: datetime | str
    """When what the value says was observed (default: the write's time). The server leaves a stored value
    observed later as it is, and answers it with ``skipped`` (time order)."""


class ExtractOptions(TypedDict, total=False):
    """``conversation_id`` alone (no messages): the server reads the conversation's stored messages this
    agent has not extracted yet; ``after_message_id`` or ``message_ids`` say which. ``key_prefix``
    (``"memories/"``): the facts' place: each fact's key goes under it, and the facts are compared only
    with the entries under it in the scope new facts go to."""

    agent_id: str
    visibility: Visibility
    group_ids: list[str]
    category: str
    conversation_id: str
    after_message_id: str
    message_ids: list[str]
    dry_run: bool
    turn_id: str
    key_prefix: str


class Narrowing(TypedDict, total=False):
    """What a list, a search and a recall by relevance narrow to on the server, before the page is cut:
    ``key_prefix``, one ``visibility``, and ``filter``, LangGraph's filter on the value's fields
    (``{field: value}`` or ``{field: {"$gt": value}}``; ``$eq $ne $gt $gte $lt $lte``)."""

    key_prefix: str
    visibility: Visibility
    filter: dict[str, Any]


class ReadOptions(TypedDict, total=False):
    """What every memory read can ask for: the groups it reads for, and ``include_superseded`` (also entries
    no longer valid: superseded by a Dream summary, or past their ``validTo``)."""

    group_ids: list[str]
    include_superseded: bool


class CategoryOptions(ReadOptions, total=False):
    limit: int
    offset: int


class ListOptions(CategoryOptions, Narrowing, total=False):
    """``agent_id``: only the entries this agent wrote (that the caller may see); ``as_of``: the list as
    history knew it then; ``min_confidence``: only entries at least that sure."""

    agent_id: str
    as_of: datetime | str
    min_confidence: float


class RankedFilters(Narrowing, total=False):
    """Filters of every ranked read, applied with visibility on the server. ``min_score``: only results at
    least this relevant (a probability, 0 to 1, the same scale for every query); ``category``: one or any of
    several; ``source``; ``updated_after`` (a datetime or ISO 8601 text); and :class:`Narrowing`'s."""

    min_score: float
    category: str | list[str]
    source: str
    updated_after: datetime | str


class SearchOptions(ListOptions, RankedFilters, total=False):
    """``mode`` defaults to ``hybrid`` here (meaning and words); the REST endpoint's own default is EDDI's
    literal ``keyword``. ``agent_id``: only the entries this agent wrote."""

    mode: SearchMode
    agent_id: str
    min_confidence: float


class RecallOptions(RankedFilters, total=False):
    """With ``q``: recalled by relevance, the best ``limit`` (the agent's ``recallTopK`` when left out), at
    least ``min_score`` relevant when given (no cut when left out), narrowed by the filters;
    ``source_agent_id``: only the entries this agent wrote."""

    agent_id: str
    group_ids: list[str]
    order: RecallOrder
    limit: int
    q: str
    mode: RankedMode
    source_agent_id: str
    as_of: datetime | str
    min_confidence: float


class MessageOptions(TypedDict, total=False):
    channel: Channel
    session_id: str
    memory_epoch: int


class MessageListOptions(TypedDict, total=False):
    channel: Channel
    after: str
    limit: int
    epoch: str | int
    view: str
    agent_id: str


class ConversationListOptions(TypedDict, total=False):
    user_id: str
    after: str
    limit: int


class ToolContext(TypedDict, total=False):
    turn_id: str
    conversation_id: str
    group_ids: list[str]


class ConversationSearchOptions(TypedDict, total=False):
    user_id: str
    agent_id: str
    channel: Channel
    limit: int
    offset: int


class AgentListOptions(TypedDict, total=False):
    capability: str
    status: str
    limit: int
    offset: int


class AgentFields(TypedDict, total=False):
    display_name: str
    capabilities: list[str]
    model: str
    status: str


class ToolCallListOptions(TypedDict, total=False):
    after: str
    agent_id: str
    limit: int
    since: datetime | str
    """ISO 8601."""
    success: bool
    task_id: str
    tool: str


class EventListOptions(TypedDict, total=False):
    after: str
    """The ``next`` cursor of the previous page; none: the oldest event."""
    types: list[str]
    """Only these event types (``memory.created``, ...); none: every type."""
    limit: int


class TaskCreateOptions(TypedDict, total=False):
    assignee_id: str
    user_id: str
    context: Any
    visibility: Visibility
    group_ids: list[str]


class TaskListOptions(TypedDict, total=False):
    assignee_id: str
    creator_id: str
    status: TaskStatus
    limit: int
    offset: int


class TaskUpdate(TypedDict, total=False):
    status: TaskStatus
    result: Any
