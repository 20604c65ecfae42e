"""The OpenAI Agents SDK adapter: real ``Runner`` runs with a scripted model (no network), two agents on
one conversation through ``MemoryPlatformSession``, each with its own key (seed 004's isolation, by the
server)."""

import asyncio
import importlib.util
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, ModelSettings, Runner, function_tool, set_tracing_disabled
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from memoryplatform_client import NotFoundError
from memoryplatform_client.agents import MemoryPlatformSession, memory_instructions
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

pytestmark = pytest.mark.django_db(transaction=True)
set_tracing_disabled(True)  # no trace export: these tests use no network


def _reply(text: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(
        id="msg_1",
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
    )


def _call(name: str, arguments: dict[str, Any]) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(
        type="function_call", name=name, arguments=json.dumps(arguments), call_id=f"call_{name}", id="fc_1"
    )


class ScriptedModel(Model):
    """Answers each turn with the next scripted output, and records what the agent was given."""

    def __init__(self, *turns: list[Any]) -> None:
        self.turns = list(turns)
        self.inputs: list[list[Any]] = []
        self.instructions: list[str | None] = []

    async def get_response(self, system_instructions, input, *args, **kwargs):  # type: ignore[no-untyped-def]
        self.instructions.append(system_instructions)
        self.inputs.append([input] if isinstance(input, str) else list(input))
        return ModelResponse(output=self.turns.pop(0), usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError


def _texts(items: list[Any]) -> list[str]:
    """Every piece of text in a model's input: messages' text, tool calls' names and tool outputs."""
    texts = []
    for item in items:
        item = item if isinstance(item, dict) else item.model_dump()
        content = item.get("content")
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts.extend(part.get("text", "") for part in content)
        if item.get("type") == "function_call":
            texts.append(f"call:{item['name']}")
        if item.get("type") == "function_call_output":
            texts.append(f"output:{item['output']}")
    return texts


@function_tool
def order_status(order: str) -> str:
    """The status of an order."""
    return f"order {order} ships Monday"


def test_two_agents_share_one_conversation_each_seeing_only_its_own_items(
    client_for, async_client_for, support
):
    nova, aniza, outsider = support
    cid = client_for(role="admin").create_conversation("u1", group_id="support")["id"]
    nova_api, aniza_api, outsider_api = (async_client_for(a) for a in (nova, aniza, outsider))

    nova_model = ScriptedModel(
        [_call("order_status", {"order": "A17"})],
        [_reply("Nova: your order ships Monday")],
        [_reply("Nova: you're welcome")],
    )
    aniza_model = ScriptedModel([_reply("Aniza: the refund policy is 30 days")])
    nova_agent = Agent(name="nova", model=nova_model, tools=[order_status], model_settings=ModelSettings())
    aniza_agent = Agent(name="aniza", model=aniza_model)

    async def scenario() -> None:
        nova_session = MemoryPlatformSession(nova_api, cid)
        aniza_session = MemoryPlatformSession(aniza_api, cid)
        first = await Runner.run(nova_agent, "Where is order A17?", session=nova_session)
        assert first.final_output == "Nova: your order ships Monday"

        await Runner.run(aniza_agent, "What is the refund policy?", session=aniza_session)
        seen_by_aniza = _texts(aniza_model.inputs[0])
        assert seen_by_aniza == [
            "Where is order A17?",
            "What is the refund policy?",
        ]  # every user message, no reply

        await Runner.run(nova_agent, "Thanks!", session=nova_session)
        seen_by_nova = _texts(nova_model.inputs[2])
        assert seen_by_nova == [
            "Where is order A17?",
            "call:order_status",
            "output:order A17 ships Monday",
            "Nova: your order ships Monday",
            "What is the refund policy?",
            "Thanks!",
        ]
        assert not any("Aniza" in text for text in seen_by_nova)

        # pop_item and clear_session hide the caller's own view only.
        popped = await nova_session.pop_item()
        assert popped is not None and _texts([popped]) == ["Nova: you're welcome"]
        assert _texts(await nova_session.get_items())[-1] == "Thanks!"
        assert _texts(await nova_session.get_items(limit=2)) == ["What is the refund policy?", "Thanks!"]
        await aniza_session.clear_session()
        assert await aniza_session.get_items() == []
        assert len(await nova_session.get_items()) == 6
        # A user message after the clear is seen again.
        await nova_session.add_items([{"role": "user", "content": "One more thing"}])
        assert _texts(await aniza_session.get_items()) == ["One more thing"]

        # An agent outside the conversation's group is refused: the conversation is not found (issue 33).
        outsider_agent = Agent(name="outsider", model=ScriptedModel([_reply("never")]))
        with pytest.raises(NotFoundError) as refused:
            await Runner.run(outsider_agent, "hi", session=MemoryPlatformSession(outsider_api, cid))
        assert refused.value.code == "not_found"

        for api in (nova_api, aniza_api, outsider_api):
            await api.close()

    asyncio.run(scenario())


def test_a_session_that_does_not_record_user_messages_writes_only_the_agents_items(
    client_for, async_client_for, support
):
    nova = support[0]
    admin = client_for(role="admin")
    cid = admin.create_conversation("u3")["id"]
    admin.append_message(cid, "user", "Where is order A17?")  # the application posts the user's message
    model = ScriptedModel([_reply("It ships Monday")])
    api = async_client_for(nova)

    async def scenario() -> None:
        async with api:
            session = MemoryPlatformSession(api, cid, record_user_messages=False)
            await Runner.run(Agent(name="nova", model=model), [], session=session)  # the message is there

    asyncio.run(scenario())
    assert _texts(model.inputs[0]) == ["Where is order A17?"]  # once
    history = admin.list_messages(cid)["data"]
    assert [(m["role"], m["agentId"]) for m in history] == [("user", None), ("assistant", "nova")]


def test_recalled_memories_are_given_as_instructions(client_for, async_client_for, support):
    nova = support[0]
    client_for(nova).upsert_memory(
        "u2", "preferred_language", "German", category="preference", visibility="global"
    )
    api = async_client_for(nova)
    model = ScriptedModel([_reply("Hallo!")])
    agent = Agent(name="nova", model=model, instructions=memory_instructions(api, "u2", "You are Nova."))

    async def scenario() -> None:
        async with api:
            await Runner.run(agent, "Hi")

    asyncio.run(scenario())
    assert model.instructions == [
        "You are Nova.\n\nWhat you know about this user:\n- preferred_language: German"
    ]


def _example(name: str) -> Any:
    """A module of clients/python/examples, loaded from its file (the examples are scripts, no package)."""
    path = Path(__file__).resolve().parents[2] / "clients" / "python" / "examples" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"example_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_handoff_stores_each_item_under_its_author(
    client_for, async_client_for, key_for, server_url, support
):
    """The README's handoff example, run as written: nova hands off to aniza in one run; nova's handoff call
    is stored as nova's, aniza's reply as aniza's, and each agent's view shows only its own items."""
    nova, aniza, _ = support
    admin = client_for(role="admin")
    cid = admin.create_conversation("u1", group_id="support")["id"]

    example = _example("agents_handoff")
    answer = asyncio.run(example.main(server_url, key_for(nova), key_for(aniza), cid))
    assert answer == "Aniza: refunds take 30 days."

    stored = [
        (m["agentId"], m["role"], m["content"][0]["item"].get("type", "message"))
        for m in admin.iter_messages(cid, channel="history")
    ]
    assert stored == [
        ("nova", "user", "message"),  # the user's message, recorded by the run's first agent
        ("nova", "tool", "function_call"),  # transfer_to_aniza: nova's
        ("nova", "tool", "function_call_output"),
        ("aniza", "assistant", "message"),  # the reply: aniza's, not nova's
    ]

    def view(agent) -> list[str]:  # type: ignore[no-untyped-def]
        return [
            _texts([m["content"][0]["item"]])[0] if _texts([m["content"][0]["item"]]) else m["role"]
            for m in client_for(agent).iter_messages(cid, channel="history", view="agent")
        ]

    assert "Aniza: refunds take 30 days." not in view(nova)
    assert view(aniza) == ["How long do refunds take?", "Aniza: refunds take 30 days."]

    # A session for both continues with the agent last handed to: its view, its items.
    apis = {"nova": async_client_for(nova), "aniza": async_client_for(aniza)}

    async def next_turn() -> list[Any]:
        session = MemoryPlatformSession(apis, cid, agent="aniza")
        items = await session.get_items()
        await session.add_items([{"role": "assistant", "content": "Aniza: anything else?"}])
        for api in apis.values():
            await api.close()
        return items

    assert _texts(asyncio.run(next_turn())) == ["How long do refunds take?", "Aniza: refunds take 30 days."]
    last = list(admin.iter_messages(cid, channel="history"))[-1]
    assert (last["agentId"], last["content"][0]["text"]) == ("aniza", "Aniza: anything else?")
    with pytest.raises(ValueError, match="not one of"):
        MemoryPlatformSession({"nova": async_client_for(nova)}, cid, agent="aniza")
