"""The MCP tool ``extract_memories`` over stdio (``manage.py mcp``, a subprocess) against the scripted LLM
server, whose URL the server process gets in its settings."""

import json
from collections.abc import Iterator

import pytest

from tests.agenttools.mcp_harness import McpEnv, call, ok, run, stdio_session
from tests.extraction.conftest import PRICES, fact, facts
from tests.llm_server import LLMScript, llm_server


@pytest.fixture
def scripted_llm() -> Iterator[LLMScript]:
    script = LLMScript([])
    with llm_server(script):
        yield script


def _llm_env(script: LLMScript) -> dict[str, str]:
    return {
        "LLM_PROVIDER": "anthropic",
        "LLM_URL": script.url,
        "LLM_MODEL": "test-model",
        "LLM_PRICES": json.dumps(PRICES),
    }


def test_an_agent_extracts_facts_through_the_mcp_tool(mcp_env: McpEnv, scripted_llm: LLMScript):
    user = "mcp-extract"
    scripted_llm.answers = [facts(fact("home_city", "Lisbon")), facts(fact("home_city", "Lisbon"))]
    messages = [{"role": "user", "content": "I live in Lisbon.", "id": "m1"}]

    async def main() -> None:
        async with stdio_session(mcp_env, "agent-a", **_llm_env(scripted_llm)) as client:
            first = await ok(client, "extract_memories", userId=user, messages=messages)
            assert [o["op"] for o in first["operations"]] == ["ADD"]
            again = await ok(client, "extract_memories", userId=user, messages=messages)
            assert [o["op"] for o in again["operations"]] == ["NOOP"]
            assert again["operations"][0]["entryId"] == first["operations"][0]["entryId"]
            entry = await ok(client, "get_memory_by_key", userId=user, key="home_city")
            assert (entry["value"], entry["source"], entry["confidence"]) == ("Lisbon", "extracted", 0.9)
            refused, is_error = await call(client, "extract_memories", userId=user, messages=[])
            assert is_error and "messages" in refused["error"]

    run(main)
    assert scripted_llm.requests[0]["path"] == "/v1/messages" and len(scripted_llm.requests) == 2


def test_the_mcp_tool_stops_at_the_agents_llm_budget(mcp_env: McpEnv, scripted_llm: LLMScript):
    """The same budget as REST (issue 44, finding 5): refused before the call, naming it. As agent-b: the
    package's database is shared, and agent-a spent in the test above."""
    user = "mcp-budget"
    scripted_llm.answers = [facts(fact("home_city", "Lisbon"))]
    messages = [{"role": "user", "content": "I live in Lisbon."}]
    env = {**_llm_env(scripted_llm), "LLM_BUDGET_PER_AGENT": "0.20"}  # $0.12 a call: two calls start

    async def main() -> None:
        async with stdio_session(mcp_env, "agent-b", **env) as client:
            for _ in range(2):
                await ok(client, "extract_memories", userId=user, messages=messages)
            refused, is_error = await call(client, "extract_memories", userId=user, messages=messages)
            assert is_error and "LLM budget reached" in refused["error"], refused
            assert "agent 'agent-b' spent $0.240000 of its $0.20 in the last 24 h" in refused["error"]

    run(main)
    assert len(scripted_llm.requests) == 2  # on main: 3, and on without end
