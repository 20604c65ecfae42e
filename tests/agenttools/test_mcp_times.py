"""Times at the MCP door (issue 53, finding 1): ``observedAt`` and ``updatedAfter`` are checked as REST
checks them (``usermemory.writerules.checked_time``): a time out of range or malformed is a clear tool error,
never "internal error", and nothing is written, so every read of the user goes on."""

from tests.agenttools.mcp_harness import McpEnv, error, ok, run, stdio_session

U = "mcp-times"


def test_a_time_out_of_range_or_malformed_is_refused_and_the_user_stays_readable(mcp_env: McpEnv):
    async def main() -> None:
        async with stdio_session(mcp_env, "agent-a") as client:
            write = {"userId": U, "key": "city", "value": "Lisbon", "visibility": "global"}
            for when in ("0001-01-01T00:00:00+00:01", "0001-01-01T00:00:00Z"):
                refused = await error(client, "upsert_user_memory", **write, observedAt=when)
                assert refused.startswith("observedAt must be a time from 0001-01-02"), refused
            for when in ("2026-13-45T00:00:00Z", "2026-01-01T00:00:00+24:00", "yesterday"):
                refused = await error(client, "upsert_user_memory", **write, observedAt=when)
                assert refused.startswith("observedAt must be an ISO 8601 time"), refused
                refused = await error(client, "search_user_memories", userId=U, query="x", updatedAfter=when)
                assert refused.startswith("updatedAfter must be an ISO 8601 time"), refused
            assert (await ok(client, "list_user_memories", userId=U))["memories"] == []
            await ok(client, "upsert_user_memory", **write, observedAt="2026-01-01T00:00:00+00:01")
            listed = (await ok(client, "list_user_memories", userId=U))["memories"]
            assert [e["observedAt"] for e in listed] == ["2025-12-31T23:59:00Z"]

    run(main)
