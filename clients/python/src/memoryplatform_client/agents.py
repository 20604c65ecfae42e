"""OpenAI Agents SDK adapter (extra ``agents``): a ``Session`` over one memoryplatform conversation, and
instructions that carry the memories an agent recalls about the user.

Each agent uses its own key; the server does the isolation (seed 004): reading the conversation's history
with ``view=agent``, an agent gets every user message and only its own assistant messages and tool items,
so two agents share one conversation id with no suffix. A key outside the conversation's group is refused as
for a conversation that does not exist (``NotFoundError``).

Items are stored on the conversation's ``history`` channel, one message per item: the SDK's item as it is,
in a content block ``{"type": "openai_agents.item", "item": {...}}``, beside its text. The conversation is
append-only (it is the audit record), so :meth:`MemoryPlatformSession.pop_item` and
:meth:`~MemoryPlatformSession.clear_session` hide items from this agent's session rather than delete them:
they write a marker to the agent's own ``memory`` stream, which only that agent reads. They change nothing
another agent sees.

Opt-in memory formation: ``MemoryPlatformSession(..., extract_facts=True)`` sends each turn's new user and
assistant messages to the server's extraction after they are stored (``POST .../extract`` with the
conversation and the messages' ids): the facts about the conversation's user are added, updated or left as
they are, bounded by who may read the conversation. A failed extraction never fails the turn: it is logged,
and kept in :attr:`MemoryPlatformSession.last_extraction_error`.

Handoffs: give the session a map from the SDK's agent names to their clients,
``MemoryPlatformSession({"nova": nova_client, "aniza": aniza_client}, conversation_id)``. Each item is stored
with the key of the agent that produced it: the run's starting agent (``agent=``, by default the map's
first), and after a handoff (the SDK's ``{"assistant": name}`` output of a ``transfer_to_...`` call, itself
the handing-off agent's) the agent handed to. The session keeps that agent for the next run, as
``result.last_agent`` does; set ``session.agent`` when a run starts with another. Reads (``get_items``,
``pop_item``, ``clear_session``) are the current agent's view.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from agents import Agent, RunContextWrapper, TResponseInputItem
from agents.memory import SessionABC, SessionSettings

from memoryplatform_client._async import AsyncMemoryPlatform
from memoryplatform_client._calls import RecallOptions, message_input
from memoryplatform_client.errors import MemoryPlatformError
from memoryplatform_client.types import Extraction, ExtractMessage, MemoryEntry, Message, MessageInput, Role

logger = logging.getLogger(__name__)

ITEM_BLOCK = "openai_agents.item"
MARKER_BLOCK = "openai_agents.session_marker"
BATCH = 20  # the server's batch limit
_ROLES: dict[str, Role] = {
    "user": "user",
    "assistant": "assistant",
    "system": "system",
    "developer": "system",
}


def _item_text(item: Any) -> str:
    """The readable text of an item (its string content, or its text parts), for other readers."""
    content = item.get("content") if isinstance(item, dict) else None
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def _to_message(item: TResponseInputItem, session_id: str) -> MessageInput:
    data: dict[str, Any] = dict(item)
    role: Role = (
        _ROLES.get(str(data.get("role")), "tool") if data.get("type", "message") == "message" else "tool"
    )
    block: dict[str, Any] = {"type": ITEM_BLOCK, "item": data}
    text = _item_text(data)
    if text:
        block["text"] = text
    return message_input(role, [block], {"session_id": session_id})


def _to_item(message: Message) -> TResponseInputItem:
    for block in message["content"]:
        if block.get("type") == ITEM_BLOCK and isinstance(block.get("item"), dict):
            return block["item"]
    text = "".join(str(block.get("text", "")) for block in message["content"])
    role = message["role"] if message["role"] in ("user", "system") else "assistant"
    return {"role": role, "content": text}


def _handed_to(item: Any, agents: Mapping[str, Any]) -> str | None:
    """The agent a handoff's output names (the SDK's ``{"assistant": name}``), if it is one of ``agents``."""
    if not isinstance(item, dict) or item.get("type") != "function_call_output":
        return None
    try:
        output = json.loads(item.get("output") or "")
    except (TypeError, ValueError):
        return None
    if isinstance(output, dict) and list(output) == ["assistant"] and output["assistant"] in agents:
        return str(output["assistant"])
    return None


class MemoryPlatformSession(SessionABC):
    """The OpenAI Agents SDK ``Session`` protocol over one conversation, for the agent of ``client``'s key,
    or, with handoffs, for several: ``client`` a map from SDK agent names to their clients (see the module).

    With ``record_user_messages=False`` the session writes only the agents' own items: for a user message
    already in the conversation (the application posted it, or another agent's session recorded it), run
    the agent with an empty input, ``Runner.run(agent, [], session=session)``, and it reads the message once
    from the history.
    """

    def __init__(
        self,
        client: AsyncMemoryPlatform | Mapping[str, AsyncMemoryPlatform],
        conversation_id: str,
        *,
        agent: str | None = None,
        session_settings: SessionSettings | None = None,
        record_user_messages: bool = True,
        extract_facts: bool = False,
    ) -> None:
        self.clients: dict[str, AsyncMemoryPlatform] = (
            dict(client) if isinstance(client, Mapping) else {"": client}
        )
        if not self.clients:
            raise ValueError("A session needs a client, or a map of SDK agent names to clients.")
        self.agent = next(iter(self.clients)) if agent is None else agent
        if self.agent not in self.clients:
            raise ValueError(f"agent {self.agent!r} is not one of {sorted(self.clients)}.")
        self.conversation_id = conversation_id
        self.session_id = conversation_id
        self.session_settings = session_settings
        self.record_user_messages = record_user_messages
        self.extract_facts = extract_facts
        self.last_extraction: Extraction | None = None
        self.last_extraction_error: MemoryPlatformError | None = None
        self._user_id: str | None = None
        self._turn: list[ExtractMessage] = []  # the turn's stored messages, until its answer is stored

    @property
    def client(self) -> AsyncMemoryPlatform:
        """The current agent's client: the one whose view is read, and whose items come next."""
        return self.clients[self.agent]

    async def _hidden(self) -> tuple[set[str], int]:
        """From this agent's markers: the message ids popped, and the sequence number cleared through."""
        popped: set[str] = set()
        cleared_through = 0
        async for message in self.client.iter_messages(
            self.conversation_id, channel="memory", epoch="all", limit=200
        ):
            for block in message["content"]:
                if block.get("type") != MARKER_BLOCK:
                    continue
                if block.get("op") == "pop":
                    popped.add(str(block.get("messageId")))
                elif block.get("op") == "clear":
                    cleared_through = max(cleared_through, int(block.get("throughSeq", 0)))
        return popped, cleared_through

    async def _visible(self) -> list[Message]:
        """The agent's view of the history (every user message, its own items), minus what it hid."""
        popped, cleared_through = await self._hidden()
        return [
            message
            async for message in self.client.iter_messages(
                self.conversation_id, channel="history", view="agent", limit=200
            )
            if message["seq"] > cleared_through and message["id"] not in popped
        ]

    async def _mark(self, **marker: Any) -> None:
        await self.client.append_message(
            self.conversation_id,
            "system",
            [{"type": MARKER_BLOCK, **marker}],
            channel="memory",
            session_id=self.session_id,
        )

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        if limit is None and self.session_settings is not None:
            limit = self.session_settings.limit
        messages = await self._visible()
        if limit is not None:
            messages = messages[-limit:] if limit > 0 else []
        return [_to_item(message) for message in messages]

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Store the items, each with its author's key, in order: consecutive items of one author together,
        at most ``BATCH`` a request. A handoff's output makes the agent it names the next items' author."""
        runs: list[tuple[str, list[MessageInput]]] = []
        for item in items:
            if self.record_user_messages or not (isinstance(item, dict) and item.get("role") == "user"):
                if not runs or runs[-1][0] != self.agent or len(runs[-1][1]) == BATCH:
                    runs.append((self.agent, []))
                runs[-1][1].append(_to_message(item, self.session_id))
            self.agent = _handed_to(item, self.clients) or self.agent
        stored: list[Message] = []
        for author, messages in runs:
            stored += await self.clients[author].append_messages(self.conversation_id, messages)
        if self.extract_facts:
            await self._extract(stored)

    async def _extract(self, stored: list[Message]) -> None:
        """The opt-in after each turn: the SDK stores a turn's input, then its answer; once the answer (an
        assistant message) is stored, the turn's user and assistant messages with text go to extraction."""
        for message in stored:
            text = "".join(str(block.get("text", "")) for block in message["content"]).strip()
            if text and message["role"] in ("user", "assistant"):
                self._turn.append({"role": message["role"], "content": text, "id": message["id"]})
        if not any(m["role"] == "assistant" for m in self._turn):
            return
        turn, self._turn = self._turn, []
        try:
            if self._user_id is None:
                self._user_id = (await self.client.get_conversation(self.conversation_id))["userId"]
            self.last_extraction = await self.client.extract(
                self._user_id, turn[-50:], conversation_id=self.conversation_id
            )
            self.last_extraction_error = None
        except MemoryPlatformError as exc:
            self.last_extraction_error = exc
            logger.warning("Extraction after the turn failed (the turn is stored): %s", exc)

    async def pop_item(self) -> TResponseInputItem | None:
        messages = await self._visible()
        if not messages:
            return None
        await self._mark(op="pop", messageId=messages[-1]["id"])
        return _to_item(messages[-1])

    async def clear_session(self) -> None:
        messages = await self._visible()
        if messages:
            await self._mark(op="clear", throughSeq=messages[-1]["seq"])


def format_memories(
    entries: Sequence[MemoryEntry], *, heading: str = "What you know about this user:"
) -> str:
    """Recalled memories as a block of instructions: one ``- key: value`` line each (empty without any)."""
    if not entries:
        return ""
    lines = [f"- {entry['key']}: {entry['value']}" for entry in entries]
    return "\n".join([heading, *lines])


def memory_instructions(
    client: AsyncMemoryPlatform,
    user_id: str,
    instructions: str,
    *,
    q: str | None = None,
    group_ids: list[str] | None = None,
    limit: int | None = None,
) -> Callable[[RunContextWrapper[Any], Agent[Any]], Awaitable[str]]:
    """Dynamic instructions for ``Agent(instructions=...)``: ``instructions`` followed by the memories the
    agent recalls about ``user_id`` at each run (its policy's order and limit, or by relevance to ``q``)."""

    async def render(context: RunContextWrapper[Any], agent: Agent[Any]) -> str:
        options: RecallOptions = {}
        if q is not None:
            options["q"] = q
        if group_ids is not None:
            options["group_ids"] = group_ids
        if limit is not None:
            options["limit"] = limit
        entries = await client.recall_memories(user_id, **options)
        memories = format_memories(entries)
        return f"{instructions}\n\n{memories}" if memories else instructions

    return render
