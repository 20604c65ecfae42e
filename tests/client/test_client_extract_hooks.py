"""The opt-in extraction after each turn in the framework adapters, over real HTTP and the scripted LLM: the
Agents SDK session (``extract_facts=True``) and LangGraph's :func:`extraction_node`."""

import asyncio

import pytest
from agents import Agent, Runner
from langgraph.graph import END, START, MessagesState, StateGraph
from memoryplatform_client.agents import MemoryPlatformSession
from memoryplatform_client.langgraph import MemoryPlatformStore, extraction_node, turn_messages

from tests.client.test_client_agents import ScriptedModel, _reply
from tests.extraction.conftest import fact, facts
from tests.llm_server import Answer

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_session_extracts_each_turn_when_asked(
    openai_llm, client_for, async_client_for, support, set_policy
):
    nova = support[0]
    set_policy(
        nova, extraction_visibility="group"
    )  # the default is self; group is bounded to the conversation's
    admin = client_for(role="admin")
    cid = admin.create_conversation("u7", group_id="support")["id"]
    openai_llm.answers = [facts(fact("home_city", "Lisbon", sources=[0]))]
    api = async_client_for(nova)
    session = MemoryPlatformSession(api, cid, extract_facts=True)

    async def scenario() -> None:
        async with api:
            await Runner.run(
                Agent(name="nova", model=ScriptedModel([_reply("Lovely city!")])),
                "I live in Lisbon",
                session=session,
            )

    asyncio.run(scenario())

    done = session.last_extraction
    assert done is not None and done["conversationId"] == cid
    op = done["operations"][0]
    assert (op["op"], op["visibility"], op["groupIds"]) == (
        "ADD",
        "group",
        ["support"],
    )  # bounded by the group
    history = admin.list_messages(cid)["data"]
    assert op["sources"] == [history[0]["id"]]  # the stored message's id, as provenance
    prompt = openai_llm.requests[0]["messages"][-1]["content"]
    assert '"I live in Lisbon"' in prompt and '"Lovely city!"' in prompt
    assert (
        client_for(support[1]).get_memory_by_key("u7", "home_city")["value"] == "Lisbon"
    )  # the group sees it


def test_a_failed_extraction_does_not_fail_the_turn(openai_llm, client_for, async_client_for, support):
    admin = client_for(role="admin")
    cid = admin.create_conversation("u8")["id"]
    openai_llm.answers = [Answer(status=500)]
    api = async_client_for(support[0])
    session = MemoryPlatformSession(api, cid, extract_facts=True)

    async def scenario() -> None:
        async with api:
            await Runner.run(
                Agent(name="nova", model=ScriptedModel([_reply("Hi")])), "Hello", session=session
            )

    asyncio.run(scenario())
    assert session.last_extraction is None and session.last_extraction_error is not None
    assert len(admin.list_messages(cid)["data"]) == 2  # the turn is stored


def test_a_session_extracts_nothing_unless_asked(openai_llm, client_for, async_client_for, support):
    cid = client_for(role="admin").create_conversation("u9")["id"]
    api = async_client_for(support[0])

    async def scenario() -> None:
        async with api:
            session = MemoryPlatformSession(api, cid)
            await Runner.run(
                Agent(name="nova", model=ScriptedModel([_reply("Hi")])), "I live in Lisbon", session=session
            )

    asyncio.run(scenario())
    assert openai_llm.requests == []


def test_the_langgraph_node_extracts_the_last_turn(openai_llm, client_for, support):
    nova = client_for(support[0])
    openai_llm.answers = [facts(fact("diet", "vegetarian", sources=[0]))]

    def agent(state: MessagesState) -> dict:
        return {"messages": [{"role": "assistant", "content": "Noted: no meat."}]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("remember", extraction_node(nova))
    graph.add_edge(START, "agent")
    graph.add_edge("agent", "remember")
    graph.add_edge("remember", END)
    app = graph.compile()

    earlier = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}]
    app.invoke(
        {"messages": [*earlier, {"role": "user", "content": "I'm vegetarian."}]},
        {"configurable": {"user_id": "u1"}},
    )

    prompt = openai_llm.requests[0]["messages"][-1]["content"]
    assert '<message 0> user: "I\'m vegetarian."' in prompt and '"Noted: no meat."' in prompt
    assert '"Hi"' not in prompt  # only the last turn
    item = MemoryPlatformStore(nova).get(("u1", "memories"), "diet")  # the docs' layout, the default
    assert item is not None and item.value == "vegetarian"  # a string value reads back as put


def test_turn_messages_takes_the_last_turn_only():
    messages = [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "b"},
        {"role": "tool", "content": "c"},
        {"role": "user", "content": [{"type": "text", "text": "d"}]},
        {"role": "assistant", "content": " "},
    ]
    assert turn_messages(messages) == [{"role": "user", "content": "d"}]
