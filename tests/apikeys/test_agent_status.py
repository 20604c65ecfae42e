"""Issue 16: an agent whose status is ``unavailable`` is refused writes at every door (a 403 that says why),
and still reads. An admin sets the status over REST; the key's next request sees it."""

from typing import Any

import pytest

from agenttools.mcp_server import tool_call
from apikeys.caller import Caller
from apikeys.services import apikey_authenticate
from conversations.models import Conversation, Message
from tests.conversations.utils import BASE as CONVERSATIONS
from tests.conversations.utils import create, say, text
from tests.helpers import assert_envelope
from usermemory.models import MemoryEntry

MEMORIES = "/usermemorystore/memories"
ENTRY = {"userId": "u1", "key": "lang", "value": "German", "visibility": "self"}


def _set_status(admin_api: Any, status: str) -> None:
    response = admin_api.patch("/v1/agents/agent-a", {"status": status}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["status"] == status


def _refused(response: Any) -> None:
    body = assert_envelope(response, 403, "forbidden")
    assert "unavailable" in body["error"]
    assert body["details"] == {"agentId": "agent-a", "status": "unavailable"}


@pytest.fixture
def unavailable(admin_api, agent_a_api):  # type: ignore[no-untyped-def]
    """agent-a with one entry and one conversation, then made unavailable."""
    entry = agent_a_api.put(MEMORIES, ENTRY, format="json").json()
    conversation = create(agent_a_api)
    summary = say(agent_a_api, conversation, "s1", channel="summary", role="assistant")
    _set_status(admin_api, "unavailable")
    return {"entry": entry, "conversation": conversation, "summary": summary}


def test_rest_memory_writes_are_refused_and_reads_answer(agent_a_api, unavailable):
    entry_id = unavailable["entry"]["id"]
    _refused(agent_a_api.put(MEMORIES, {**ENTRY, "value": "French"}, format="json"))
    _refused(agent_a_api.put(f"{MEMORIES}/batch", [{**ENTRY, "key": "k2"}], format="json"))
    _refused(agent_a_api.delete(f"{MEMORIES}/entry/{entry_id}"))
    _refused(agent_a_api.post("/propertiesstore/properties/u1", {"color": "blue"}, format="json"))
    _refused(agent_a_api.delete("/propertiesstore/properties/u1"))
    assert list(MemoryEntry.objects.values_list("key", "value")) == [("lang", "German")]
    assert agent_a_api.get(f"{MEMORIES}/u1").status_code == 200
    assert agent_a_api.get(f"{MEMORIES}/u1/visible").json()[0]["value"] == "German"
    assert agent_a_api.get("/v1/agents/me").json()["status"] == "unavailable"


def test_conversation_writes_are_refused_and_reads_answer(agent_a_api, unavailable):
    conversation = unavailable["conversation"]
    _refused(agent_a_api.post(CONVERSATIONS, {"userId": "u1"}, format="json"))
    message = {"role": "assistant", "content": text("x")}
    _refused(agent_a_api.post(f"{CONVERSATIONS}/{conversation}/messages", message, format="json"))
    sync = {"messages": [{"role": "user", "content": text("m")}]}
    _refused(agent_a_api.post(f"{CONVERSATIONS}/{conversation}/memory/messages/sync", sync, format="json"))
    checkpoint = {"lastEntryId": unavailable["summary"]["id"]}
    _refused(agent_a_api.put(f"{CONVERSATIONS}/{conversation}/checkpoint", checkpoint, format="json"))
    assert Conversation.objects.count() == 1 and Message.objects.count() == 1
    assert agent_a_api.get(f"{CONVERSATIONS}/{conversation}/messages").status_code == 200
    assert agent_a_api.get(f"{CONVERSATIONS}/{conversation}/context").status_code == 200


def test_llm_tools_and_mcp_refuse_writes_and_still_read(agent_a_api, unavailable):
    remember = {"userId": "u1", "arguments": {"key": "color", "value": "blue"}}
    answer = agent_a_api.post("/v1/tools/rememberFact/invoke", remember, format="json")
    assert answer.status_code == 200  # an LLM tool's refusal is text for the LLM to read
    assert answer.json()["result"].startswith("❌") and "unavailable" in answer.json()["result"]
    forget = {"userId": "u1", "arguments": {"key": "lang"}}
    assert (
        "unavailable"
        in agent_a_api.post("/v1/tools/forgetFact/invoke", forget, format="json").json()["result"]
    )
    recall = agent_a_api.post(
        "/v1/tools/recallMemories/invoke", {"userId": "u1", "arguments": {}}, format="json"
    )
    assert "German" in recall.json()["result"]

    caller = Caller.for_key(apikey_authenticate(raw_key=agent_a_api.raw_key))  # as MCP over HTTP does
    payload, is_error = tool_call(
        caller=caller, name="upsert_user_memory", arguments={"userId": "u1", "key": "k", "value": "v"}
    )
    assert is_error and "unavailable" in payload["error"]
    payload, is_error = tool_call(
        caller=caller, name="delete_user_memory", arguments={"entryId": unavailable["entry"]["id"]}
    )
    assert is_error and "unavailable" in payload["error"]
    payload, is_error = tool_call(caller=caller, name="count_user_memories", arguments={"userId": "u1"})
    assert not is_error
    assert list(MemoryEntry.objects.values_list("key", "value")) == [("lang", "German")]


def test_an_admin_makes_the_agent_write_again(admin_api, agent_a_api, unavailable):
    _refused(agent_a_api.put(MEMORIES, {**ENTRY, "value": "French"}, format="json"))
    _set_status(admin_api, "idle")
    assert agent_a_api.put(MEMORIES, {**ENTRY, "value": "French"}, format="json").status_code == 200
    _set_status(admin_api, "active")
    assert agent_a_api.put(MEMORIES, {**ENTRY, "value": "Dutch"}, format="json").status_code == 200
