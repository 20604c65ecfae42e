"""The asynchronous client, the twin of :mod:`memoryplatform_client._sync`: each method builds its request
in :mod:`memoryplatform_client._calls` and sends it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from types import TracebackType
from typing import Any, TypeVar, Unpack

import httpx

from memoryplatform_client import _activity as activity
from memoryplatform_client import _calls as calls
from memoryplatform_client import _options as opts
from memoryplatform_client import types as api
from memoryplatform_client._core import Call, ClientBase, retry_delay
from memoryplatform_client.errors import APIConnectionError, ConflictError

T = TypeVar("T")


class AsyncMemoryPlatform(ClientBase[httpx.AsyncClient, httpx.AsyncBaseTransport]):
    """An asyncio memoryplatform client for one key, with the same methods as ``MemoryPlatform``. The key
    decides who the caller is (an agent, a viewer, an admin).

    ``AsyncMemoryPlatform("http://127.0.0.1:8000", api_key="mp_...")``; use it as an async context manager, or
    await :meth:`close`. Idempotent calls (GET, PUT, DELETE) are retried on 429, 503 and connection errors.
    """

    http_class = httpx.AsyncClient

    async def close(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncMemoryPlatform:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def send(self, call: Call[T]) -> T:
        """Send one request, retrying it when :func:`retry_delay` says so; its decoded answer."""
        attempt = 0
        while True:
            try:
                response = await self._http.request(call.method, call.path, **call.request_kwargs())
            except httpx.TransportError as exc:
                wait = retry_delay(self.retry_policy, call, attempt, None)
                if wait is None:
                    raise APIConnectionError(f"{call.method} {call.path}: {exc!r}") from exc
            else:
                wait = retry_delay(self.retry_policy, call, attempt, response)
                if wait is None:
                    return call.finish(response)
            await asyncio.sleep(wait)
            attempt += 1

    # --- Memories ---------------------------------------------------------------------------------------

    async def upsert_memory(
        self, user_id: str, key: str, value: Any, **options: Unpack[opts.UpsertOptions]
    ) -> api.MemoryEntry:
        return await self.send(calls.upsert_memory(user_id, key, value, options))

    async def upsert_memories(self, entries: list[api.MemoryInput]) -> list[api.MemoryEntry]:
        """Up to 100 entries, all or nothing (build them with :func:`memoryplatform_client.memory_input`)."""
        return await self.send(calls.upsert_memories(entries))

    async def list_memories(self, user_id: str, **options: Unpack[opts.ListOptions]) -> list[api.MemoryEntry]:
        return await self.send(calls.list_memories(user_id, options))

    async def recall_memories(
        self, user_id: str, **options: Unpack[opts.RecallOptions]
    ) -> list[api.MemoryEntry]:
        """Recall (``/visible``): the policy's order and limit, or by relevance to ``q`` when given."""
        return await self.send(calls.recall_memories(user_id, options))

    async def search_memories(
        self, user_id: str, q: str, **options: Unpack[opts.SearchOptions]
    ) -> list[api.MemoryEntry]:
        return await self.send(calls.search_memories(user_id, q, options))

    async def search_all_memories(
        self, q: str, *, category: str | None = None, limit: int | None = None, offset: int | None = None
    ) -> list[api.MemoryEntry]:
        return await self.send(calls.search_all_memories(q, category, limit, offset))

    async def list_memories_by_category(
        self, user_id: str, category: str, **options: Unpack[opts.CategoryOptions]
    ) -> list[api.MemoryEntry]:
        return await self.send(calls.list_memories_by_category(user_id, category, options))

    async def get_memory_by_key(
        self, user_id: str, key: str, **options: Unpack[opts.ReadOptions]
    ) -> api.MemoryEntry:
        return await self.send(
            calls.get_memory_by_key(user_id, key, options.get("group_ids"), options.get("include_superseded"))
        )

    async def refresh_ttl(
        self, user_id: str, entry_ids: list[str], *, group_ids: list[str] | None = None
    ) -> int:
        """Renew the TTL of these entries (those the key reads): each is valid for its TTL again from now.
        Returns how many were renewed (entries without a TTL, or expired, are not)."""
        return await self.send(calls.refresh_ttl(user_id, entry_ids, group_ids))

    async def count_memories(self, user_id: str, **options: Unpack[opts.ReadOptions]) -> int:
        return await self.send(calls.count_memories(user_id, options))

    async def delete_memory(self, entry_id: str | int) -> None:
        return await self.send(calls.delete_memory(entry_id))

    async def get_memory_history(self, entry_id: str | int) -> list[api.MemoryEvent]:
        return await self.send(calls.get_memory_history(entry_id))

    async def extract(
        self,
        user_id: str,
        messages: list[api.ExtractMessage] | None = None,
        **options: Unpack[opts.ExtractOptions],
    ) -> api.Extraction:
        """Extract facts about the user from ``messages`` (``[{"role", "content"}]``, at most 50) with the
        server's LLM: each is added, updated (the old value stays in history) or left as it is, decided by
        the server; one older than the stored value is skipped. Without ``messages``, ``conversation_id=``
        reads the conversation's stored messages this agent has not extracted yet (``after_message_id=``
        or ``message_ids=`` say which). ``dry_run=True`` shows the operations and writes nothing."""
        return await self.send(calls.extract_memories(user_id, messages, options))

    # --- GDPR and legacy properties ----------------------------------------------------------------------

    async def export_user(self, user_id: str) -> dict[str, Any]:
        return await self.send(calls.export_user(user_id))

    async def erase_user(self, user_id: str) -> dict[str, Any]:
        return await self.send(calls.erase_user(user_id))

    async def get_properties(self, user_id: str) -> dict[str, Any]:
        return await self.send(calls.get_properties(user_id))

    async def set_properties(self, user_id: str, properties: dict[str, Any]) -> dict[str, Any]:
        return await self.send(calls.set_properties(user_id, properties))

    async def delete_properties(self, user_id: str) -> None:
        return await self.send(calls.delete_properties(user_id))

    # --- Conversations -----------------------------------------------------------------------------------

    async def create_conversation(
        self, user_id: str, *, title: str | None = None, group_id: str | None = None
    ) -> api.Conversation:
        return await self.send(calls.create_conversation(user_id, title, group_id))

    async def list_conversations(self, **options: Unpack[opts.ConversationListOptions]) -> api.Page:
        return await self.send(calls.list_conversations(options))

    async def iter_conversations(
        self, **options: Unpack[opts.ConversationListOptions]
    ) -> AsyncIterator[api.Conversation]:
        """Every conversation, page after page."""
        while True:
            page = await self.list_conversations(**options)
            for item in page["data"]:
                yield item
            if page["nextCursor"] is None:
                return
            options["after"] = page["nextCursor"]

    async def get_conversation(self, conversation_id: str) -> api.Conversation:
        return await self.send(calls.get_conversation(conversation_id))

    async def search_conversations(
        self, q: str, **options: Unpack[opts.ConversationSearchOptions]
    ) -> api.Page:
        """Full-text search over the messages this key may read: a page of ``MessageSearchResult``."""
        return await self.send(calls.search_conversations(q, options))

    async def append_message(
        self,
        conversation_id: str,
        role: api.Role,
        content: str | list[api.ContentBlock],
        **options: Unpack[opts.MessageOptions],
    ) -> api.Message:
        return await self.send(calls.append_message(conversation_id, role, content, options))

    async def append_messages(
        self, conversation_id: str, messages: list[api.MessageInput], *, session_id: str | None = None
    ) -> list[api.Message]:
        """At most 20, all or nothing (build them with :func:`memoryplatform_client.message_input`)."""
        return await self.send(calls.append_messages(conversation_id, messages, session_id))

    async def list_messages(
        self, conversation_id: str, **options: Unpack[opts.MessageListOptions]
    ) -> api.Page:
        return await self.send(calls.list_messages(conversation_id, options))

    async def iter_messages(
        self, conversation_id: str, **options: Unpack[opts.MessageListOptions]
    ) -> AsyncIterator[api.Message]:
        """Every message after ``after`` (or from the start), page after page, in sequence order."""
        while True:
            page = await self.list_messages(conversation_id, **options)
            for item in page["data"]:
                yield item
            if page["nextCursor"] is None:
                return
            options["after"] = page["nextCursor"]

    async def sync_memory(
        self, conversation_id: str, messages: list[api.SyncMessage], *, session_id: str | None = None
    ) -> api.SyncResult:
        return await self.send(calls.sync_memory(conversation_id, messages, session_id))

    async def get_checkpoint(self, conversation_id: str, *, agent_id: str | None = None) -> api.Checkpoint:
        return await self.send(calls.get_checkpoint(conversation_id, agent_id))

    async def set_checkpoint(self, conversation_id: str, last_entry_id: str) -> api.Checkpoint:
        return await self.send(calls.set_checkpoint(conversation_id, last_entry_id))

    async def get_context(
        self, conversation_id: str, *, agent_id: str | None = None, q: str | None = None
    ) -> api.Context:
        return await self.send(calls.get_context(conversation_id, agent_id, q))

    # --- The case log (seed 003) ---------------------------------------------------------------------------

    async def checkpoint_and_summarise(
        self, conversation_id: str, summary: str | list[api.ContentBlock], *, session_id: str | None = None
    ) -> api.Message:
        """Append ``summary`` to the case log and move the caller's checkpoint to it: everything up to and
        including the summary counts as read (read :meth:`case_log_since_checkpoint` first for others')."""
        entry = await self.append_message(
            conversation_id, "assistant", summary, **calls.case_log_options(session_id)
        )
        await self.set_checkpoint(conversation_id, entry["id"])
        return entry

    async def case_log_since_checkpoint(
        self, conversation_id: str, *, page_size: int = 50
    ) -> AsyncIterator[api.Message]:
        """The case-log entries after the caller's checkpoint, in order. An entry is marked read (the
        checkpoint moves to it) when the next one is asked for or the log ends: at least once, never lost."""
        after = (await self.get_checkpoint(conversation_id))["lastEntryId"]
        async for entry in self.iter_messages(conversation_id, **calls.case_log_query(after, page_size)):
            yield entry
            await self.set_checkpoint(conversation_id, entry["id"])

    # --- Activity: tool calls and tasks ------------------------------------------------------------------

    async def record_tool_calls(self, tool_calls: list[api.ToolCallInput]) -> list[api.ToolCall]:
        """Report tool calls the agent made (up to the server's batch limit); never retried."""
        return await self.send(activity.record_tool_calls(tool_calls))

    async def list_tool_calls(self, **options: Unpack[opts.ToolCallListOptions]) -> api.ToolCallPage:
        return await self.send(activity.list_tool_calls(options))

    async def iter_tool_calls(
        self, **options: Unpack[opts.ToolCallListOptions]
    ) -> AsyncIterator[api.ToolCall]:
        """Every tool call, newest first, page after page."""
        while True:
            page = await self.list_tool_calls(**options)
            for item in page["results"]:
                yield item
            if page["next"] is None:
                return
            options["after"] = page["next"]

    async def list_events(self, **options: Unpack[opts.EventListOptions]) -> api.ChangeEventPage:
        """Memory events after ``after``, oldest first: an agent key those about entries it may read. The
        cursor never skips an event; keep ``next`` and pass it as ``after`` next time."""
        return await self.send(activity.list_events(options))

    async def create_task(self, title: str, **options: Unpack[opts.TaskCreateOptions]) -> api.Task:
        return await self.send(activity.create_task(title, options))

    async def list_tasks(self, **options: Unpack[opts.TaskListOptions]) -> api.OffsetPage:
        return await self.send(activity.list_tasks(options))

    async def get_task(self, task_id: str) -> api.Task:
        return await self.send(activity.get_task(task_id))

    async def update_task(self, task_id: str, **update: Unpack[opts.TaskUpdate]) -> api.Task:
        """Move a task on (``status``) and set its ``result``; a PATCH, never retried."""
        return await self.send(activity.update_task(task_id, update))

    # --- Agents, groups and keys ---------------------------------------------------------------------------

    async def health(self) -> dict[str, Any]:
        """``GET /healthz``: the server answers (``{"status": "ok", ...}``, as the server reports it)."""
        return await self.send(calls.health())

    async def get_me(self) -> api.Agent:
        return await self.send(calls.get_me())

    async def list_agents(self, **options: Unpack[opts.AgentListOptions]) -> api.OffsetPage:
        return await self.send(calls.list_agents(options))

    async def create_agent(
        self, agent_id: str, *, groups: list[str] | None = None, **fields: Unpack[opts.AgentFields]
    ) -> api.Agent:
        return await self.send(calls.create_agent(agent_id, groups, fields))

    async def ensure_agent(
        self, agent_id: str, *, groups: list[str] | None = None, **fields: Unpack[opts.AgentFields]
    ) -> api.EnsuredAgent:
        """Get or create (admin keys): the agent ``agent_id``, created with these fields when it does not
        exist yet, and whether this call created it (``{"agent": ..., "created": ...}``). No
        check-then-insert: it creates, and on the server's 409 ``conflict`` (the id is taken, by an earlier
        call or a concurrent one) reads the existing agent, whose fields stay as they are."""
        try:
            return calls.ensured(await self.create_agent(agent_id, groups=groups, **fields), created=True)
        except ConflictError as exc:
            if exc.code != "conflict":
                raise
        return calls.ensured(await self.get_agent(agent_id), created=False)

    async def get_agent(self, agent_id: str) -> api.Agent:
        return await self.send(calls.get_agent(agent_id))

    async def update_agent(
        self,
        agent_id: str,
        *,
        memory_policy: dict[str, Any] | None = None,
        **fields: Unpack[opts.AgentFields],
    ) -> api.Agent:
        return await self.send(calls.update_agent(agent_id, memory_policy, fields))

    async def list_groups(self, *, limit: int | None = None, offset: int | None = None) -> api.OffsetPage:
        return await self.send(calls.list_groups(limit, offset))

    async def create_group(
        self, group_id: str, *, name: str | None = None, members: list[str] | None = None
    ) -> api.Group:
        return await self.send(calls.create_group(group_id, name, members))

    async def get_group(self, group_id: str) -> api.Group:
        return await self.send(calls.get_group(group_id))

    async def add_group_members(self, group_id: str, agent_ids: list[str]) -> api.Group:
        return await self.send(calls.add_group_members(group_id, agent_ids))

    async def remove_group_member(self, group_id: str, agent_id: str) -> None:
        return await self.send(calls.remove_group_member(group_id, agent_id))

    async def create_agent_key(
        self, agent_id: str, *, label: str | None = None, expires_at: str | None = None
    ) -> api.ApiKey:
        """An ``agent`` key for the agent; the raw key is in ``["key"]`` of this answer only."""
        return await self.send(calls.create_agent_key(agent_id, label, expires_at))

    async def list_agent_keys(
        self, agent_id: str, *, limit: int | None = None, offset: int | None = None
    ) -> api.OffsetPage:
        return await self.send(calls.list_agent_keys(agent_id, limit, offset))

    async def revoke_key(self, prefix: str) -> None:
        return await self.send(calls.revoke_key(prefix))

    # --- LLM tools -----------------------------------------------------------------------------------------

    async def list_tools(self) -> list[api.Tool]:
        return await self.send(calls.list_tools())

    async def invoke_tool(
        self, name: str, user_id: str, arguments: dict[str, Any], **context: Unpack[opts.ToolContext]
    ) -> api.ToolResult:
        return await self.send(calls.invoke_tool(name, user_id, arguments, context))
