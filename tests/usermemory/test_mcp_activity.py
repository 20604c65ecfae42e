"""MCP tool calls made with an agent key appear in that agent's tool-call log (the activity app), over both
transports, with duration and success; the log is read over REST from the harness's server."""

import json
import urllib.request

from tests.usermemory.mcp_harness import error, ok, run, sessions


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
    assert not [c for c in _log(http_url, mcp_env.keys["viewer"]) if c["tool"] == "count_user_memories"]
