"""``ttlSeconds`` through the MCP server (issue 30): the upsert sets ``validTo`` to the write plus the TTL,
and once that time has passed no MCP read sees the entry, which stays stored.

The server is a subprocess on a database of its own, so the test moves the entry's times back (as if written
two hours ago) in that database instead of waiting."""

from datetime import datetime, timedelta

import psycopg

from tests.agenttools.mcp_harness import McpEnv, error, ok, run


def _written_earlier(env: McpEnv, user: str, by: timedelta) -> None:
    with psycopg.connect(env.env["DATABASE_URL"], autocommit=True) as conn:
        conn.execute(
            "UPDATE usermemory_memoryentry SET valid_from = valid_from - %(by)s,"
            " valid_to = valid_to - %(by)s, updated_at = updated_at - %(by)s,"
            " created_at = created_at - %(by)s WHERE user_id = %(user)s",
            {"by": by, "user": user},
        )


def test_an_entry_past_its_ttl_is_seen_by_no_mcp_read(connect, transport, mcp_env):
    user = f"{transport}-ttl"

    async def main() -> None:
        async with connect("agent-a") as client:
            await ok(client, "upsert_user_memory", userId=user, key="city", value="Berlin", ttlSeconds=3600)
            entry = await ok(client, "get_memory_by_key", userId=user, key="city")
            valid = datetime.fromisoformat(entry["validTo"]) - datetime.fromisoformat(entry["validFrom"])
            assert valid == timedelta(hours=1)
            refused = await error(client, "upsert_user_memory", userId=user, key="k", value=1, ttlSeconds=0)
            assert "ttlSeconds" in refused

        _written_earlier(mcp_env, user, timedelta(hours=2))

        async with connect("agent-a") as client:
            assert (await ok(client, "list_user_memories", userId=user))["count"] == 0
            assert await ok(client, "get_visible_memories", userId=user) == []
            for mode in ("keyword", "hybrid"):
                assert await ok(client, "search_user_memories", userId=user, query="Berlin", mode=mode) == []
            missing = await error(client, "get_memory_by_key", userId=user, key="city")
            assert "No memory with key 'city'" in missing
            assert await ok(client, "count_user_memories", userId=user) == {"userId": user, "count": 0}

    run(main)
    with psycopg.connect(mcp_env.env["DATABASE_URL"]) as conn:  # still stored, with its history
        stored = conn.execute("SELECT count(*) FROM usermemory_memoryentry WHERE user_id = %s", [user])
        events = conn.execute("SELECT action FROM usermemory_memoryevent WHERE user_id = %s", [user])
        assert (stored.fetchone(), events.fetchall()) == ((1,), [("created",)])
