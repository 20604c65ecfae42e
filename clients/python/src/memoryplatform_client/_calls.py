"""Every API request, built once: each function returns the :class:`Call` that the sync and the async client
send. Names follow ``<verb>_<thing>`` so that a TypeScript client can mirror them (``searchMemories``)."""

from __future__ import annotations

import json
from typing import Any

import httpx

from memoryplatform_client._core import Call, body, iso_time, query, segment
from memoryplatform_client._options import (
    AgentFields,
    AgentListOptions,
    CategoryOptions,
    ConversationListOptions,
    ConversationSearchOptions,
    ExtractOptions,
    ListOptions,
    MessageListOptions,
    MessageOptions,
    Narrowing,
    RankedFilters,
    ReadOptions,
    RecallOptions,
    SearchOptions,
    ToolContext,
    UpsertOptions,
)
from memoryplatform_client.errors import QueryTooLongError
from memoryplatform_client.types import (
    Agent,
    ApiKey,
    Checkpoint,
    ContentBlock,
    Context,
    Conversation,
    EnsuredAgent,
    Extraction,
    ExtractMessage,
    Group,
    MemoryEntry,
    MemoryEvent,
    MemoryInput,
    Message,
    MessageInput,
    OffsetPage,
    Page,
    Role,
    SyncMessage,
    SyncResult,
    Tool,
    ToolResult,
)

MEMORIES = "/usermemorystore/memories"
MAX_QUERY_CHARS = 1000
"""The server's limit on a query (``q`` of a search, a recall or a context): ``MAX_QUERY_CHARS`` of
``memoryplatform.text``, which the platform's tests hold equal to this. A longer one is refused here,
before it is sent, with the server's 400 (:class:`QueryTooLongError`). A tool's arguments are not checked
here: ``invoke_tool`` returns the server's refusal as the tool's text, for the LLM to read."""
CONVERSATIONS = "/v1/conversations"


def _none(response: httpx.Response) -> None:
    return None


def _properties(response: httpx.Response) -> dict[str, Any]:
    """The legacy map; 204 (no properties) is an empty map."""
    return {} if response.status_code == 204 else dict(response.json())


def _count(response: httpx.Response) -> int:
    return int(response.json()["count"])


def text_content(content: str | list[ContentBlock]) -> list[ContentBlock]:
    """Content blocks: a plain string becomes one ``{"type": "text", "text": ...}`` block."""
    return [{"type": "text", "text": content}] if isinstance(content, str) else content


def _user(user_id: str) -> str:
    return f"{MEMORIES}/{segment(user_id)}"


def _conversation(conversation_id: str) -> str:
    return f"{CONVERSATIONS}/{segment(conversation_id)}"


# --- Memories ---------------------------------------------------------------------------------------------


def memory_input(user_id: str, key: str, value: Any, options: UpsertOptions) -> MemoryInput:
    """The wire shape of one upsert."""
    entry: MemoryInput = {"userId": user_id, "key": key, "value": value}
    if "category" in options:
        entry["category"] = options["category"]
    if "visibility" in options:
        entry["visibility"] = options["visibility"]
    if "source_agent_id" in options:
        entry["sourceAgentId"] = options["source_agent_id"]
    if "group_ids" in options:
        entry["groupIds"] = options["group_ids"]
    if "source_conversation_id" in options:
        entry["sourceConversationId"] = options["source_conversation_id"]
    if "turn_id" in options:
        entry["turnId"] = options["turn_id"]
    if "valid_to" in options:
        entry["validTo"] = iso_time(options["valid_to"])
    if "ttl_seconds" in options:
        entry["ttlSeconds"] = options["ttl_seconds"]
    if "confidence" in options:
        entry["confidence"] = options["confidence"]
    if "source" in options:
        entry["source"] = options["source"]
    if "observed_at" in options:
        entry["observedAt"] = iso_time(options["observed_at"])
    return entry


def _read_query(options: ReadOptions) -> list[tuple[str, str]]:
    return query(groupId=options.get("group_ids"), includeSuperseded=options.get("include_superseded"))


def _list_query(options: CategoryOptions) -> list[tuple[str, str]]:
    return _read_query(options) + query(limit=options.get("limit"), offset=options.get("offset"))


def _match_query(options: Narrowing) -> dict[str, str | None]:
    """A list's or a search's narrowing, done by the server before it cuts the page."""
    wanted = options.get("filter")
    return {
        "keyPrefix": options.get("key_prefix"),
        "visibility": options.get("visibility"),
        "filter": None if wanted is None else json.dumps(wanted, separators=(",", ":")),
    }


def upsert_memory(user_id: str, key: str, value: Any, options: UpsertOptions) -> Call[MemoryEntry]:
    return Call("PUT", MEMORIES, json=memory_input(user_id, key, value, options))


def upsert_memories(entries: list[MemoryInput]) -> Call[list[MemoryEntry]]:
    return Call("PUT", f"{MEMORIES}/batch", json=entries)


def list_memories(user_id: str, options: ListOptions) -> Call[list[MemoryEntry]]:
    more = query(
        agentId=options.get("agent_id"),
        asOf=iso_time(options.get("as_of")),
        minConfidence=options.get("min_confidence"),
        **_match_query(options),
    )
    return Call("GET", _user(user_id), params=_list_query(options) + more)


def recall_memories(user_id: str, options: RecallOptions) -> Call[list[MemoryEntry]]:
    return Call(
        "GET",
        f"{_user(user_id)}/visible",
        params=query(
            agentId=options.get("agent_id"),
            groupId=options.get("group_ids"),
            order=options.get("order"),
            limit=options.get("limit"),
            q=_query(options.get("q")),
            mode=options.get("mode"),
            sourceAgentId=options.get("source_agent_id"),
            asOf=iso_time(options.get("as_of")),
            minConfidence=options.get("min_confidence"),
            **_ranked_filters(options),
        ),
    )


def _ranked_filters(options: RankedFilters) -> dict[str, Any]:
    return {
        "minScore": options.get("min_score"),
        "category": options.get("category"),
        "source": options.get("source"),
        "updatedAfter": iso_time(options.get("updated_after")),
        **_match_query(options),
    }


def _query(q: str | None) -> str | None:
    """``q`` as sent: refused here when it is longer than the server takes."""
    if q is not None and len(q) > MAX_QUERY_CHARS:
        raise QueryTooLongError(len(q), MAX_QUERY_CHARS)
    return q


def search_memories(user_id: str, q: str, options: SearchOptions) -> Call[list[MemoryEntry]]:
    return Call(
        "GET",
        f"{_user(user_id)}/search",
        params=query(
            q=_query(q),
            mode=options.get("mode", "hybrid"),
            limit=options.get("limit"),
            offset=options.get("offset"),
            agentId=options.get("agent_id"),
            minConfidence=options.get("min_confidence"),
            **_ranked_filters(options),
        )
        + _read_query(options),
    )


def search_all_memories(
    q: str, category: str | None, limit: int | None, offset: int | None
) -> Call[list[MemoryEntry]]:
    params = query(q=_query(q), category=category, limit=limit, offset=offset)
    return Call("GET", "/v1/memories/search", params=params)


def list_memories_by_category(
    user_id: str, category: str, options: CategoryOptions
) -> Call[list[MemoryEntry]]:
    return Call(
        "GET",
        f"{_user(user_id)}/category/{segment(category)}",
        params=_list_query(options),
    )


def get_memory_by_key(
    user_id: str, key: str, group_ids: list[str] | None, include_superseded: bool | None = None
) -> Call[MemoryEntry]:
    read: ReadOptions = {"group_ids": group_ids} if group_ids is not None else {}
    if include_superseded is not None:
        read["include_superseded"] = include_superseded
    return Call("GET", f"{_user(user_id)}/key/{segment(key)}", params=_read_query(read))


def refresh_ttl(user_id: str, entry_ids: list[str], group_ids: list[str] | None) -> Call[int]:
    return Call(
        "POST",
        f"{_user(user_id)}/ttl-refresh",
        json=body(ids=entry_ids, groupIds=group_ids),
        decode=lambda response: int(response.json()["refreshed"]),
    )


def count_memories(user_id: str, options: ReadOptions) -> Call[int]:
    return Call("GET", f"{_user(user_id)}/count", params=_read_query(options), decode=_count)


def delete_memory(entry_id: str | int) -> Call[None]:
    return Call("DELETE", f"{MEMORIES}/entry/{segment(entry_id)}", decode=_none)


def get_memory_history(entry_id: str | int) -> Call[list[MemoryEvent]]:
    return Call("GET", f"{MEMORIES}/entry/{segment(entry_id)}/history")


def extract_memories(
    user_id: str, messages: list[ExtractMessage] | None, options: ExtractOptions
) -> Call[Extraction]:
    """Facts about the user extracted from up to 50 messages by the server's LLM, then added, updated or left
    as they are (decided by the server, in code); ``messages=None`` with a ``conversation_id``: from the
    conversation's stored messages."""
    payload = body(
        messages=messages,
        agentId=options.get("agent_id"),
        visibility=options.get("visibility"),
        groupIds=options.get("group_ids"),
        category=options.get("category"),
        conversationId=options.get("conversation_id"),
        afterMessageId=options.get("after_message_id"),
        messageIds=options.get("message_ids"),
        dryRun=options.get("dry_run"),
        turnId=options.get("turn_id"),
        keyPrefix=options.get("key_prefix"),
    )
    return Call("POST", f"{_user(user_id)}/extract", json=payload)


# --- GDPR and legacy properties ----------------------------------------------------------------------------


def export_user(user_id: str) -> Call[dict[str, Any]]:
    return Call("GET", f"{_user(user_id)}/export")


def erase_user(user_id: str) -> Call[dict[str, Any]]:
    return Call("DELETE", _user(user_id))


def _properties_path(user_id: str) -> str:
    return f"/propertiesstore/properties/{segment(user_id)}"


def get_properties(user_id: str) -> Call[dict[str, Any]]:
    return Call("GET", _properties_path(user_id), decode=_properties)


def set_properties(user_id: str, properties: dict[str, Any]) -> Call[dict[str, Any]]:
    return Call("POST", _properties_path(user_id), json=properties, decode=_properties)


def delete_properties(user_id: str) -> Call[None]:
    return Call("DELETE", _properties_path(user_id), decode=_none)


# --- Conversations ----------------------------------------------------------------------------------------


def create_conversation(user_id: str, title: str | None, group_id: str | None) -> Call[Conversation]:
    return Call("POST", CONVERSATIONS, json=body(userId=user_id, title=title, groupId=group_id))


def list_conversations(options: ConversationListOptions) -> Call[Page]:
    return Call(
        "GET",
        CONVERSATIONS,
        params=query(userId=options.get("user_id"), after=options.get("after"), limit=options.get("limit")),
    )


def get_conversation(conversation_id: str) -> Call[Conversation]:
    return Call("GET", _conversation(conversation_id))


def search_conversations(q: str, options: ConversationSearchOptions) -> Call[Page]:
    """Full-text search over the messages this key may read: a page of :class:`MessageSearchResult`."""
    params = query(
        q=_query(q),
        userId=options.get("user_id"),
        agentId=options.get("agent_id"),
        channel=options.get("channel"),
        limit=options.get("limit"),
        offset=options.get("offset"),
    )
    return Call("GET", f"{CONVERSATIONS}/search", params=params)


def message_input(role: Role, content: str | list[ContentBlock], options: MessageOptions) -> MessageInput:
    """The wire shape of one message."""
    message: MessageInput = {"role": role, "content": text_content(content)}
    if "channel" in options:
        message["channel"] = options["channel"]
    if "session_id" in options:
        message["sessionId"] = options["session_id"]
    if "memory_epoch" in options:
        message["memoryEpoch"] = options["memory_epoch"]
    return message


def append_message(
    conversation_id: str, role: Role, content: str | list[ContentBlock], options: MessageOptions
) -> Call[Message]:
    return Call(
        "POST", f"{_conversation(conversation_id)}/messages", json=message_input(role, content, options)
    )


def append_messages(
    conversation_id: str, messages: list[MessageInput], session_id: str | None
) -> Call[list[Message]]:
    return Call(
        "POST",
        f"{_conversation(conversation_id)}/messages",
        json=body(messages=messages, sessionId=session_id),
        decode=lambda response: list(response.json()["data"]),
    )


def list_messages(conversation_id: str, options: MessageListOptions) -> Call[Page]:
    return Call(
        "GET",
        f"{_conversation(conversation_id)}/messages",
        params=query(
            channel=options.get("channel"),
            after=options.get("after"),
            limit=options.get("limit"),
            epoch=None if options.get("epoch") is None else str(options.get("epoch")),
            view=options.get("view"),
            agentId=options.get("agent_id"),
        ),
    )


def sync_memory(
    conversation_id: str, messages: list[SyncMessage], session_id: str | None
) -> Call[SyncResult]:
    return Call(
        "POST",
        f"{_conversation(conversation_id)}/memory/messages/sync",
        json=body(messages=messages, sessionId=session_id),
    )


def get_checkpoint(conversation_id: str, agent_id: str | None) -> Call[Checkpoint]:
    return Call("GET", f"{_conversation(conversation_id)}/checkpoint", params=query(agentId=agent_id))


def set_checkpoint(conversation_id: str, last_entry_id: str) -> Call[Checkpoint]:
    return Call("PUT", f"{_conversation(conversation_id)}/checkpoint", json={"lastEntryId": last_entry_id})


def get_context(conversation_id: str, agent_id: str | None, q: str | None) -> Call[Context]:
    params = query(agentId=agent_id, q=_query(q))
    return Call("GET", f"{_conversation(conversation_id)}/context", params=params)


# --- Agents, groups and keys --------------------------------------------------------------------------------


# --- Agents, groups and keys --------------------------------------------------------------------------------


def health() -> Call[dict[str, Any]]:
    return Call("GET", "/healthz")


def get_me() -> Call[Agent]:
    return Call("GET", "/v1/agents/me")


def list_agents(options: AgentListOptions) -> Call[OffsetPage]:
    params = query(
        capability=options.get("capability"),
        status=options.get("status"),
        limit=options.get("limit"),
        offset=options.get("offset"),
    )
    return Call("GET", "/v1/agents", params=params)


def _agent_fields(fields: AgentFields) -> dict[str, Any]:
    return body(
        displayName=fields.get("display_name"),
        capabilities=fields.get("capabilities"),
        model=fields.get("model"),
        status=fields.get("status"),
    )


def create_agent(agent_id: str, groups: list[str] | None, fields: AgentFields) -> Call[Agent]:
    return Call("POST", "/v1/agents", json={"id": agent_id, **_agent_fields(fields), **body(groups=groups)})


def get_agent(agent_id: str) -> Call[Agent]:
    return Call("GET", f"/v1/agents/{segment(agent_id)}")


def ensured(agent: Agent, *, created: bool) -> EnsuredAgent:
    """What ``ensure_agent`` answers. It creates the agent and, on the server's 409 ``conflict`` (the id is
    taken, by an earlier call or a concurrent one), reads the existing one: no check-then-insert race."""
    return {"agent": agent, "created": created}


def update_agent(agent_id: str, memory_policy: dict[str, Any] | None, fields: AgentFields) -> Call[Agent]:
    return Call(
        "PATCH",
        f"/v1/agents/{segment(agent_id)}",
        json={**_agent_fields(fields), **body(memoryPolicy=memory_policy)},
    )


def list_groups(limit: int | None, offset: int | None) -> Call[OffsetPage]:
    return Call("GET", "/v1/groups", params=query(limit=limit, offset=offset))


def create_group(group_id: str, name: str | None, members: list[str] | None) -> Call[Group]:
    return Call("POST", "/v1/groups", json=body(id=group_id, name=name, members=members))


def get_group(group_id: str) -> Call[Group]:
    return Call("GET", f"/v1/groups/{segment(group_id)}/members")


def add_group_members(group_id: str, agent_ids: list[str]) -> Call[Group]:
    return Call("POST", f"/v1/groups/{segment(group_id)}/members", json={"agentIds": agent_ids})


def remove_group_member(group_id: str, agent_id: str) -> Call[None]:
    return Call("DELETE", f"/v1/groups/{segment(group_id)}/members/{segment(agent_id)}", decode=_none)


def create_agent_key(agent_id: str, label: str | None, expires_at: str | None) -> Call[ApiKey]:
    return Call("POST", f"/v1/agents/{segment(agent_id)}/keys", json=body(label=label, expiresAt=expires_at))


def list_agent_keys(agent_id: str, limit: int | None, offset: int | None) -> Call[OffsetPage]:
    return Call("GET", f"/v1/agents/{segment(agent_id)}/keys", params=query(limit=limit, offset=offset))


def revoke_key(prefix: str) -> Call[None]:
    return Call("DELETE", f"/v1/keys/{segment(prefix)}", decode=_none)


# --- LLM tools ----------------------------------------------------------------------------------------------


def list_tools() -> Call[list[Tool]]:
    return Call("GET", "/v1/tools")


def invoke_tool(name: str, user_id: str, arguments: dict[str, Any], context: ToolContext) -> Call[ToolResult]:
    return Call(
        "POST",
        f"/v1/tools/{segment(name)}/invoke",
        json={
            "userId": user_id,
            "arguments": arguments,
            **body(
                turnId=context.get("turn_id"),
                conversationId=context.get("conversation_id"),
                groupIds=context.get("group_ids"),
            ),
        },
    )


# --- The case log (seed 003) --------------------------------------------------------------------------------


def case_log_options(session_id: str | None) -> MessageOptions:
    """A case-log entry: the shared, append-only ``summary`` channel."""
    options: MessageOptions = {"channel": "summary"}
    if session_id is not None:
        options["session_id"] = session_id
    return options


def case_log_query(after: str | None, page_size: int) -> MessageListOptions:
    """The case log after a checkpoint (from the start when ``None``)."""
    options: MessageListOptions = {"channel": "summary", "limit": page_size}
    if after is not None:
        options["after"] = after
    return options
