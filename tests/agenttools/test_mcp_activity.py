"""MCP tool calls made with an agent key appear in that agent's tool-call log (the activity app), over both
transports, with duration and success; the log is read over REST from the harness's server."""

import json
import urllib.error
import urllib.request

from tests.agenttools.mcp_harness import error, ok, run, sessions


def _log(http_url: str, key: str, **params: str) -> list[dict]:
    query = "&".join(f"{name}={value}" for name, value in params.items())
    request = urllib.request.Request(
        f"{http_url}/v1/activity/tool-calls?{query}", headers={"Authorization": f"Bearer {key}"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 (the test's own server)
        return json.loads(response.read())["results"]


def test_mcp_calls_are_logged_for_the_keys_agent(connect, transport, http_url, mcp_env):
    user = f"{transport}-activity"
    session = f"{transport}-session"

    async def main() -> None:
        async with sessions(connect, "agent-a", "viewer") as (agent, viewer):
            await ok(
                agent, "upsert_user_memory", userId=user, key=session, value="blue", category="preference"
            )
            await error(agent, "get_memory_by_key", userId=user, key="missing-" + session)
            await ok(viewer, "count_user_memories", userId=user)  # a viewer acts as no agent: not logged

    run(main)
    logged = [c for c in _log(http_url, mcp_env.keys["agent-a"]) if user in json.dumps(c["args"])]
    assert [c["tool"] for c in logged] == ["get_memory_by_key", "upsert_user_memory"]
    missing, upserted = logged
    assert upserted["via"] == "mcp" and upserted["agentId"] == "agent-a" and upserted["success"] is True
    assert upserted["args"]["key"] == session and upserted["result"]["status"] == "upserted"
    assert isinstance(upserted["durationMs"], int)
    assert (
        missing["success"] is False and missing["error"] and missing["result"] == {"error": missing["error"]}
    )
    assert not [c for c in _log(http_url, mcp_env.keys["agent-b"]) if user in json.dumps(c["args"])]
    # The viewer's call is nowhere in the log, which a viewer key reads whole.
    counted = _log(http_url, mcp_env.keys["viewer"], tool="count_user_memories", limit="500")
    assert not [c for c in counted if user in json.dumps(c["args"])]


def _llm_tool(http_url: str, key: str, name: str, body: dict) -> tuple[int, dict]:
    request = urllib.request.Request(
        f"{http_url}/v1/tools/{name}/invoke",
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 (the test's own server)
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as refused:
        return refused.code, json.loads(refused.read())


def test_a_nul_in_any_argument_is_a_clear_error_and_the_call_is_logged_escaped(
    connect, transport, http_url, mcp_env
):
    """Issue 44, finding 11: a NUL (which PostgreSQL refuses in text and jsonb) in a string argument or one
    nested in a value is the tool error the LLM tools' 400 gives, not "internal error", and the call is in
    the agent's tool-call log, with its arguments escaped so the log can store them."""
    user = f"{transport}-nul"
    key = mcp_env.keys["agent-a"]
    status, llm_tools = _llm_tool(
        http_url, key, "searchMemory", {"userId": user, "arguments": {"query": "a\x00b"}}
    )
    assert status == 400, llm_tools
    said = llm_tools["error"]
    assert "NUL" in said

    async def main() -> None:
        async with connect("agent-a") as agent:
            assert await error(agent, "search_user_memories", userId=user, query="a\x00b") == said
            nested = {"note": ["fine", {"deep": "x\x00y"}]}
            assert await error(agent, "upsert_user_memory", userId=user, key="k", value=nested) == said

    run(main)
    logged = [c for c in _log(http_url, key) if c["args"].get("userId") == user]
    assert [c["tool"] for c in logged] == ["upsert_user_memory", "search_user_memories"]
    upsert, search = logged
    assert search["success"] is False and search["error"] == said and search["via"] == "mcp"
    assert search["args"]["query"] == "a\\u0000b"  # the six characters, not a NUL
    assert upsert["success"] is False and upsert["error"] == said
    assert upsert["args"]["value"] == {"note": ["fine", {"deep": "x\\u0000y"}]}
    assert upsert["args"]["key"] == "k"


def test_mcp_task_tools_for_agent_keys(connect, transport):
    user = f"{transport}-mcp-tasks"

    async def main() -> None:
        async with sessions(connect, "agent-a", "agent-b", "viewer") as (agent_a, agent_b, viewer):
            task = await ok(
                agent_a, "create_task", title="Check the order", assigneeId="agent-b", userId=user
            )
            assert task["creatorId"] == "agent-a" and task["status"] == "pending" and task["userId"] == user
            assert 2**52 <= int(task["id"]) < 2**53  # a public id (memoryplatform.publicids)
            assert [t["id"] for t in await ok(agent_b, "list_my_tasks")] == [task["id"]]
            assert "assignee" in await error(agent_a, "complete_task", taskId=task["id"], result="x")
            done = await ok(agent_b, "complete_task", taskId=task["id"], result={"ok": True})
            assert done["status"] == "done" and done["memoryEntryId"]
            memory = await ok(agent_b, "get_memory_by_key", userId=user, key=f"task:{task['id']}")
            assert memory["category"] == "task_result" and memory["value"]["result"] == {"ok": True}
            assert await ok(agent_b, "list_my_tasks") == []
            assert "not available to viewer keys" in await error(viewer, "create_task", title="t")

    run(main)


def test_mcp_upsert_writes_confidence_and_source(connect, transport):
    user = f"{transport}-mcp-insights"

    async def main() -> None:
        async with connect("agent-a") as agent:
            await ok(
                agent,
                "upsert_user_memory",
                userId=user,
                key="k",
                value="v",
                confidence=0.8,
                source="task_outcome",
            )
            entry = await ok(agent, "get_memory_by_key", userId=user, key="k")
            assert (entry["confidence"], entry["source"]) == (0.8, "task_outcome")
            assert "confidence" in await error(
                agent, "upsert_user_memory", userId=user, key="k", value="v", confidence=2
            )

    run(main)
