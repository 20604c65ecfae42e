"""The API's shapes, with the server's own (camelCase) field names, as TypedDicts: at run time they are the
JSON objects the server sent, so a TypeScript client can declare the same interfaces."""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

Visibility = Literal["self", "group", "global"]
SearchMode = Literal["keyword", "semantic", "hybrid"]
RankedMode = Literal["semantic", "hybrid"]  # recall by relevance (`q` on recall)
RecallOrder = Literal["most_recent", "most_accessed"]
Channel = Literal["history", "memory", "summary"]
Role = Literal["user", "assistant", "system", "tool"]
ContentBlock = dict[str, Any]


class MemoryEntry(TypedDict):
    id: str
    userId: str
    key: str
    value: Any
    category: str
    visibility: Visibility
    sourceAgentId: str | None
    groupIds: list[str]
    sourceConversationId: str | None
    conflicted: bool
    accessCount: int
    createdAt: str
    updatedAt: str
    lastAccessedAt: str | None
    confidence: NotRequired[float | None]
    source: NotRequired[str | None]
    observedAt: NotRequired[str]  # when what the value says was observed (time order)
    skipped: NotRequired[dict[str, Any]]  # an upsert time order left out: why, and both times
    score: NotRequired[float]  # semantic and hybrid search only


class MemoryInput(TypedDict):
    """One entry to upsert (``PUT /usermemorystore/memories`` and ``/batch``)."""

    userId: str
    key: str
    value: Any
    category: NotRequired[str]
    visibility: NotRequired[Visibility]
    sourceAgentId: NotRequired[str | None]
    groupIds: NotRequired[list[str] | None]
    sourceConversationId: NotRequired[str | None]
    turnId: NotRequired[str | None]
    validTo: NotRequired[str | None]
    ttlSeconds: NotRequired[int | None]
    confidence: NotRequired[float | None]
    source: NotRequired[str | None]
    observedAt: NotRequired[str | None]


class MemoryEvent(TypedDict, total=False):
    action: str
    oldValue: Any
    newValue: Any
    oldValueHidden: bool
    newValueHidden: bool
    createdAt: str
    provenance: dict[str, Any] | None  # an extracted fact's: source, confidence, messages, model


class ExtractMessage(TypedDict):
    """One message given to extraction: ``role`` (user, assistant, system, tool), ``content``, and an
    optional ``id`` recorded in each fact's provenance."""

    role: str
    content: str
    id: NotRequired[str]


class ExtractOperation(TypedDict, total=False):
    """What extraction did with one proposed fact: ``op`` is ADD, UPDATE, NOOP, REJECTED or SKIPPED (time
    order: the stored value was observed after the fact's message; ``observedAt`` and
    ``storedObservedAt`` say when)."""

    op: str
    key: str
    value: str
    category: str
    confidence: float
    sources: list[Any]
    entryId: str | None
    matchedBy: str
    previousValue: Any
    visibility: str
    groupIds: list[str]
    reason: str
    observedAt: str | None
    storedObservedAt: str


class Extraction(TypedDict):
    userId: str
    agentId: str
    conversationId: str | None
    dryRun: bool
    model: str
    promptVersion: str
    cost: float
    added: int
    updated: int
    unchanged: int
    rejected: int
    skipped: int
    messages: int
    alreadyExtracted: list[str]  # the messages named that this agent extracted before: left out
    operations: list[ExtractOperation]


class Count(TypedDict):
    userId: str
    count: int


class Conversation(TypedDict):
    id: str
    userId: str
    groupId: str | None
    title: str
    createdAt: str


class Message(TypedDict):
    id: str
    conversationId: str
    seq: int
    channel: Channel
    role: Role
    agentId: str | None
    memoryEpoch: int | None
    content: list[ContentBlock]
    sessionId: str | None
    createdAt: str


class MessageInput(TypedDict):
    role: Role
    content: list[ContentBlock]
    channel: NotRequired[Channel]
    sessionId: NotRequired[str | None]
    memoryEpoch: NotRequired[int | None]


class SyncMessage(TypedDict):
    role: Role
    content: list[ContentBlock]


class Page(TypedDict):
    """A cursor page: pass ``nextCursor`` as ``after`` for the next one (null when nothing more follows)."""

    data: list[Any]
    nextCursor: str | None


class SyncResult(TypedDict):
    memoryEpoch: int | None
    noOp: bool
    epochIncremented: bool
    messages: list[Message]


class Checkpoint(TypedDict):
    conversationId: str
    agentId: str
    lastEntryId: str | None
    updatedAt: str | None


class ContextMemory(TypedDict):
    memoryEpoch: int | None
    messages: list[Message]


class ContextCaseLog(TypedDict):
    checkpoint: str | None
    data: list[Message]
    nextCursor: str | None


class Context(TypedDict):
    conversation: Conversation
    agentId: str
    memory: ContextMemory
    caseLog: ContextCaseLog
    history: list[Message]
    userMemories: list[MemoryEntry]


class Agent(TypedDict, total=False):
    id: str
    displayName: str
    capabilities: list[str]
    model: str
    status: str
    groups: list[str]
    lastActiveAt: str | None
    createdAt: str
    updatedAt: str
    memoryPolicy: dict[str, Any]


class Group(TypedDict):
    id: str
    name: str
    members: list[str]
    createdAt: str


class ApiKey(TypedDict):
    prefix: str
    role: str
    agentId: str | None
    label: str
    createdAt: str
    expiresAt: str | None
    lastUsedAt: str | None
    revokedAt: str | None
    key: NotRequired[str]  # only in the answer that made it


class OffsetPage(TypedDict):
    """A limit/offset page of the agent directory: ``count``, ``next``, ``previous`` and ``results``."""

    count: int
    next: str | None
    previous: str | None
    results: list[Any]


class Tool(TypedDict):
    type: str
    function: dict[str, Any]


class ToolResult(TypedDict):
    result: str


class EnsuredAgent(TypedDict):
    """What ``ensure_agent`` answers: the agent, and whether this call created it."""

    agent: Agent
    created: bool


class MessageSearchResult(Message):
    """A message found by ``search_conversations``: its conversation's user and its score."""

    userId: str
    score: float


TaskStatus = Literal["pending", "in_progress", "done", "failed", "cancelled"]


class Task(TypedDict):
    id: str
    title: str
    creatorId: str
    assigneeId: str
    userId: str | None
    context: Any
    status: TaskStatus
    result: Any
    visibility: Visibility
    groupIds: list[str]
    memoryEntryId: str | None
    createdAt: str
    updatedAt: str
    finishedAt: str | None


class ToolCallInput(TypedDict, total=False):
    """One tool call as the agent reports it (``POST /v1/activity/tool-calls``): ``tool`` is required."""

    tool: str
    args: Any
    result: Any
    success: bool
    durationMs: int | None
    error: str | None
    taskId: str | None
    conversationId: str | None
    sessionId: str | None
    createdAt: str | None


class ToolCall(TypedDict):
    id: str
    agentId: str
    tool: str
    args: Any
    result: Any
    success: bool
    durationMs: int | None
    error: str
    taskId: str | None
    conversationId: str | None
    sessionId: str | None
    via: Literal["rest", "llm_tool", "mcp"]
    createdAt: str


class ToolCallPage(TypedDict):
    """A page of the activity log: pass ``next`` as ``after`` for the next one (``None`` when nothing more
    follows)."""

    results: list[ToolCall]
    next: str | None


class ChangeEvent(TypedDict, total=False):
    """A memory event: what the change feed lists and a webhook receives. ``value``/``oldValue`` are
    ``None`` when the reader may not see them; a ``user.erased`` event holds ``id``, ``type``,
    ``occurredAt`` and ``userId`` only."""

    id: str
    type: str
    occurredAt: str
    userId: str
    key: str | None
    entryId: str | None
    visibility: str
    groupIds: list[str]
    sourceAgent: str | None
    value: Any
    oldValue: Any
    valueHidden: bool
    data: dict[str, Any] | None


class ChangeEventPage(TypedDict):
    """Events oldest first; pass ``next`` as ``after`` for the next page (the same cursor when none came:
    poll again with it later)."""

    results: list[ChangeEvent]
    next: str
