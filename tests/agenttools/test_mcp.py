"""The MCP server through real ``mcp`` SDK client sessions, over stdio (``manage.py mcp``) and streamable HTTP
(``manage.py serve``: uvicorn serving ``config.asgi``, ``/mcp/``).

Both servers are subprocesses, so they run against a database of their own on the suite's PostgreSQL server
(``tests/agenttools/mcp_harness.py``). Each test uses user ids of its own. The transports' own behaviour is
in ``test_mcp_transports.py``.
"""

import json
import re
from pathlib import Path

from django.conf import settings

from tests.agenttools.mcp_harness import ALL_TOOLS, READ_TOOLS, TASK_TOOLS, error, ok, run, sessions

# --- Listing ------------------------------------------------------------------------------------------------


def test_the_listed_tools_depend_on_the_role(connect):
    listed: dict[str, set[str]] = {}

    async def main() -> None:
        roles = ("admin", "viewer", "agent-a")
        async with sessions(connect, *roles) as clients:
            for role, client in zip(roles, clients, strict=True):
                tools = (await client.list_tools()).tools
                assert all(tool.input_schema["type"] == "object" and tool.description for tool in tools)
                listed[role] = {tool.name for tool in tools}

    run(main)
    assert listed["admin"] == ALL_TOOLS and len(listed["admin"]) == 9
    assert listed["viewer"] == READ_TOOLS and len(listed["viewer"]) == 5
    assert listed["agent-a"] == ALL_TOOLS - {"delete_all_user_memories"} | TASK_TOOLS
    # The docs' table says the same of each role (issue 47): a tool row is `| `name` | roles | ...`.
    page = (Path(settings.BASE_DIR) / "docs" / "mcp.md").read_text()
    section = page[page.index("## MCP server") :]
    section = section[: section.index("\n## ", 1)] if "\n## " in section[1:] else section
    table = {
        name: {role.strip() for role in roles.split(",")}
        for name, roles in re.findall(r"^\| `([a-z_]+)` \| ([a-z, ]+) \|", section, flags=re.MULTILINE)
    }
    documented = {
        role: {name for name, roles in table.items() if role in roles}
        for role in ("admin", "viewer", "agent")
    }
    assert documented == {"admin": listed["admin"], "viewer": listed["viewer"], "agent": listed["agent-a"]}


# --- Every tool ---------------------------------------------------------------------------------------------


def test_an_admin_calls_each_of_the_eight_tools(connect, transport):
    user = f"{transport}-every-tool"

    async def main() -> None:
        async with connect("admin") as client:
            language = await ok(
                client,
                "upsert_user_memory",
                userId=user,
                key="language",
                value="English",
                category="preference",
                visibility="global",
            )
            assert set(language) == {"id", "key", "status"}  # EDDI's shape
            assert language["key"] == "language" and language["status"] == "upserted"
            color = await ok(
                client,
                "upsert_user_memory",
                userId=user,
                key="favorite_color",
                value="blue",
                category="preference",
                agentId="agent-a",
            )
            again = await ok(  # this server's older name for agentId still works
                client,
                "upsert_user_memory",
                userId=user,
                key="favorite_color",
                value="green",
                category="preference",
                sourceAgentId="agent-a",
            )
            assert again == {"id": color["id"], "key": "favorite_color", "status": "upserted"}

            listed = await ok(client, "list_user_memories", userId=user)
            assert listed["userId"] == user and listed["count"] == 2
            assert [e["key"] for e in listed["memories"]] == ["favorite_color", "language"]
            first = listed["memories"][0]
            assert first["id"] == color["id"] and first["value"] == "green"
            assert first["visibility"] == "self" and first["sourceAgentId"] == "agent-a"
            assert listed["memories"][1]["id"] == language["id"]
            assert listed["memories"][1]["sourceAgentId"] is None

            visible_a = await ok(client, "get_visible_memories", userId=user, agentId="agent-a")
            assert {e["key"] for e in visible_a} == {"favorite_color", "language"}
            visible_b = await ok(client, "get_visible_memories", userId=user, agentId="agent-b")
            assert [e["key"] for e in visible_b] == ["language"]
            assert "agentId is required" in await error(client, "get_visible_memories", userId=user)

            found = await ok(client, "search_user_memories", userId=user, query="GREEN", mode="keyword")
            assert [e["key"] for e in found] == ["favorite_color"]  # EDDI's literal match
            ranked = await ok(client, "search_user_memories", userId=user, query="GREEN")  # hybrid
            assert [e["key"] for e in ranked][0] == "favorite_color"
            assert all(isinstance(e["score"], float) for e in ranked)

            entry = await ok(client, "get_memory_by_key", userId=user, key="language")
            assert entry["value"] == "English" and entry["visibility"] == "global"
            assert await error(client, "get_memory_by_key", userId=user, key="nope") == (
                f"No memory with key 'nope' found for user: {user}"
            )

            assert await ok(client, "count_user_memories", userId=user) == {"userId": user, "count": 2}

            assert 2**52 <= int(color["id"]) < 2**53  # a public id (memoryplatform.publicids)
            deleted = await ok(client, "delete_user_memory", entryId=color["id"])
            assert deleted == {"entryId": color["id"], "status": "deleted"}
            assert "No memory entry" in await error(client, "delete_user_memory", entryId=color["id"])
            assert (await ok(client, "count_user_memories", userId=user))["count"] == 1

            erased = await ok(client, "delete_all_user_memories", userId=user, confirmation="CONFIRM")
            assert erased == {"userId": user, "entriesDeleted": 1, "status": "deleted"}
            assert (await ok(client, "count_user_memories", userId=user))["count"] == 0

    run(main)


def test_arguments_outside_a_tools_schema_and_unknown_tools_are_errors(connect):
    async def main() -> None:
        async with connect("admin") as client:
            assert "'userId' is a required property" in await error(client, "count_user_memories")
            assert "limit" in await error(client, "list_user_memories", userId="u", limit=0)
            assert "Unknown tool" in await error(client, "drop_database")

    run(main)


# --- The CONFIRM gate --------------------------------------------------------------------------------------


def test_delete_all_needs_confirm(connect, transport):
    user = f"{transport}-gdpr"

    async def main() -> None:
        async with connect("admin") as client:
            for key in ("a", "b"):
                await ok(client, "upsert_user_memory", userId=user, key=key, value=1, visibility="global")
            assert "'confirmation' is a required property" in await error(
                client, "delete_all_user_memories", userId=user
            )
            for wrong in ("", "confirm", "yes", "CONFIRM "):
                message = await error(client, "delete_all_user_memories", userId=user, confirmation=wrong)
                assert message.startswith("Nothing was deleted") and 'confirmation="CONFIRM"' in message
            assert (await ok(client, "count_user_memories", userId=user))["count"] == 2
            erased = await ok(client, "delete_all_user_memories", userId=user, confirmation="CONFIRM")
            assert erased == {"userId": user, "entriesDeleted": 2, "status": "deleted"}
            assert (await ok(client, "count_user_memories", userId=user))["count"] == 0

    run(main)


# --- Role refusals -----------------------------------------------------------------------------------------


def test_a_viewer_reads_but_cannot_write(connect, transport):
    user = f"{transport}-viewer"

    async def main() -> None:
        async with sessions(connect, "admin", "viewer") as (admin, viewer):
            entry = await ok(
                admin, "upsert_user_memory", userId=user, key="k", value="v", sourceAgentId="agent-a"
            )
            listed = await ok(viewer, "list_user_memories", userId=user)
            assert [e["key"] for e in listed["memories"]] == ["k"]
            assert (await ok(viewer, "get_memory_by_key", userId=user, key="k"))["value"] == "v"
            refusals = [
                await error(
                    viewer, "upsert_user_memory", userId=user, key="k2", value="v", visibility="global"
                ),
                await error(viewer, "delete_user_memory", entryId=entry["id"]),
                await error(viewer, "delete_all_user_memories", userId=user, confirmation="CONFIRM"),
            ]
            assert all("not available to viewer keys" in message for message in refusals), refusals
            assert (await ok(viewer, "count_user_memories", userId=user))["count"] == 1

    run(main)


def test_an_agent_acts_only_as_itself(connect, transport):
    user = f"{transport}-agents"

    async def main() -> None:
        async with sessions(connect, "agent-a", "agent-b") as (agent_a, agent_b):
            own = await ok(
                agent_a, "upsert_user_memory", userId=user, key="secret", value="a's", category="context"
            )
            mine = await ok(agent_a, "get_memory_by_key", userId=user, key="secret")
            assert mine["id"] == own["id"] and mine["sourceAgentId"] == "agent-a"
            assert mine["visibility"] == "self"
            for name in ("agentId", "sourceAgentId"):  # EDDI's name and the older one
                assert "cannot write as agent 'agent-b'" in await error(
                    agent_a, "upsert_user_memory", userId=user, key="x", value="v", **{name: "agent-b"}
                )
            named = await ok(
                agent_a, "upsert_user_memory", userId=user, key="named", value="v", agentId="agent-a"
            )
            assert named["status"] == "upserted"
            await ok(agent_a, "delete_user_memory", entryId=named["id"])
            assert "allowedCategories" in await error(
                agent_a, "upsert_user_memory", userId=user, key="x", value="v", category="gossip"
            )
            assert "not available to agent keys" in await error(
                agent_a, "delete_all_user_memories", userId=user, confirmation="CONFIRM"
            )

            assert await ok(agent_b, "list_user_memories", userId=user) == {
                "userId": user,
                "count": 0,
                "memories": [],
            }
            assert await ok(agent_b, "search_user_memories", userId=user, query="secret") == []
            assert await ok(agent_b, "count_user_memories", userId=user) == {"userId": user, "count": 0}
            assert "No memory with key 'secret'" in await error(
                agent_b, "get_memory_by_key", userId=user, key="secret"
            )
            assert "cannot read as agent 'agent-a'" in await error(
                agent_b, "get_visible_memories", userId=user, agentId="agent-a"
            )
            hidden = await error(agent_b, "delete_user_memory", entryId=own["id"])
            assert f"No memory entry with id {own['id']}." in hidden

            assert [e["key"] for e in await ok(agent_a, "get_visible_memories", userId=user)] == ["secret"]
            await ok(agent_a, "delete_user_memory", entryId=int(own["id"]))
            assert (await ok(agent_a, "count_user_memories", userId=user))["count"] == 0
            # A hidden entry and an id that no longer exists get the same answer.
            assert await error(agent_b, "delete_user_memory", entryId=own["id"]) == hidden

    run(main)


# --- EDDI's arguments (issue 16) ---------------------------------------------------------------------------


def test_group_ids_as_eddi_sends_them(connect, transport):
    """``groupIds`` is one comma-separated string in EDDI's tools; a list still works."""
    user = f"{transport}-groups"

    async def main() -> None:
        async with sessions(connect, "admin", "agent-a") as (admin, agent_a):
            await ok(
                admin,
                "upsert_user_memory",
                userId=user,
                key="team_note",
                value="shared",
                agentId="agent-a",
                visibility="group",
                groupIds="team",
            )
            for groups in ("team", " team , other ", ["team"]):
                recalled = await ok(
                    admin, "get_visible_memories", userId=user, agentId="agent-a", groupIds=groups
                )
                assert [e["key"] for e in recalled] == ["team_note"], groups
            assert (
                await ok(admin, "get_visible_memories", userId=user, agentId="agent-a", groupIds="other")
                == []
            )
            too_many = ",".join(f"g{i}" for i in range(51))
            assert "groupIds" in await error(
                admin, "get_visible_memories", userId=user, agentId="agent-a", groupIds=too_many
            )
            # An agent key may name itself, or leave agentId out; naming another agent is refused.
            mine = await ok(agent_a, "get_visible_memories", userId=user, agentId="agent-a", groupIds="team")
            assert [e["key"] for e in mine] == ["team_note"]
            assert "cannot read as agent 'agent-b'" in await error(
                agent_a, "get_visible_memories", userId=user, agentId="agent-b", groupIds="team"
            )
            assert "different agents" in await error(
                admin, "upsert_user_memory", userId=user, key="x", value=1, agentId="agent-a",
                sourceAgentId="agent-b",
            )  # fmt: skip
            assert (await ok(admin, "count_user_memories", userId=user))["count"] == 1

    run(main)


# --- Hostile input (issue 16) ------------------------------------------------------------------------------


def _other_digits(number: str) -> str:
    """The same number in Arabic-Indic digits, which ``str.isdigit`` and ``int`` both take."""
    return "".join(chr(0x0660 + int(digit)) for digit in number)


def test_an_entry_id_is_ascii_digits_only(connect, transport):
    user = f"{transport}-unicode-id"

    async def main() -> None:
        async with connect("admin") as client:
            entry = await ok(
                client, "upsert_user_memory", userId=user, key="k", value="v", visibility="global"
            )
            for bad in (_other_digits(entry["id"]), "١", "-1", "1.0", " 1", "9" * 30, "", -1):
                message = await error(client, "delete_user_memory", entryId=bad)
                assert "entryId must be a memory entry id" in message or "Invalid arguments" in message, bad
            assert (await ok(client, "count_user_memories", userId=user))["count"] == 1  # nothing deleted
            assert (await ok(client, "delete_user_memory", entryId=entry["id"]))["status"] == "deleted"

    run(main)


_INTERNALS = ("Traceback", "Error(", "DataError", "psycopg", "0x00", "ErrorDetail", "django.")


def test_tool_errors_are_clean_messages(connect, transport):
    """Input the database refuses (PostgreSQL takes no NUL in text) is a clean error or an answer, never an
    internal exception's text; out-of-range numbers are refused by the schema, without echoing the value."""
    user = f"{transport}-clean-errors"

    async def main() -> None:
        async with connect("admin") as client:
            calls = [
                ("count_user_memories", {"userId": "nul\x00user"}),
                (
                    "upsert_user_memory",
                    {"userId": user, "key": "k\x00", "value": "v", "visibility": "global"},
                ),
                (
                    "upsert_user_memory",
                    {"userId": user, "key": "k", "value": "a\x00b", "visibility": "global"},
                ),
                ("search_user_memories", {"userId": user, "query": "\x00"}),
                ("list_user_memories", {"userId": user, "offset": 2**63}),
                ("list_user_memories", {"userId": user, "limit": 2**64}),
            ]
            for name, arguments in calls:
                result = await client.call_tool(name, arguments)
                text = result.content[0].text
                payload = json.loads(text)  # always JSON: a result, or {"error": message}
                if result.is_error:
                    assert set(payload) == {"error"}, payload
                    assert not any(marker in payload["error"] for marker in _INTERNALS), payload
                    assert str(2**63) not in payload["error"]

    run(main)
