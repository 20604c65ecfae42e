"""The MCP server through real ``mcp`` SDK client sessions, over stdio (``manage.py mcp``) and streamable HTTP
(``manage.py serve``: uvicorn serving ``memoryplatform.asgi``, ``/mcp/``; and gunicorn serving
``memoryplatform.wsgi`` for WSGI users).

Both servers are subprocesses, so they run against a database made for this module on the suite's PostgreSQL
server (migrated and provisioned by ``manage.py`` subprocesses). Each test uses user ids of its own.
"""

import json
import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
import psycopg
import pytest
from django.conf import settings
from django.db import connection
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

BASE_DIR = Path(settings.BASE_DIR)
PYTHON = sys.executable
READ_TOOLS = {
    "list_user_memories",
    "get_visible_memories",
    "search_user_memories",
    "get_memory_by_key",
    "count_user_memories",
}
ALL_TOOLS = READ_TOOLS | {"upsert_user_memory", "delete_user_memory", "delete_all_user_memories"}

PROVISION = """
import json
from apikeys.services import agent_create, apikey_create
agent_create(agent_id="agent-a", group_ids=["team"])
agent_create(agent_id="agent-b")
keys = {
    "admin": apikey_create(role="admin")[1],
    "viewer": apikey_create(role="viewer")[1],
    "agent-a": apikey_create(role="agent", agent_id="agent-a")[1],
    "agent-b": apikey_create(role="agent", agent_id="agent-b")[1],
}
print("KEYS=" + json.dumps(keys))
"""


@dataclass
class McpEnv:
    env: dict[str, str]
    keys: dict[str, str]
    tmp: Path


def _manage(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    result = subprocess.run(  # noqa: S603
        [PYTHON, "manage.py", *args], cwd=BASE_DIR, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result


def _admin_sql(statement: str) -> None:
    """Run one statement outside a transaction (CREATE/DROP DATABASE) on the suite's PostgreSQL server."""
    db = settings.DATABASES["default"]
    with psycopg.connect(
        dbname=db["NAME"],
        user=db["USER"],
        password=db["PASSWORD"],
        host=db["HOST"],
        port=db["PORT"],
        autocommit=True,
    ) as conn:
        conn.execute(statement)


@pytest.fixture(scope="module")
def mcp_env(tmp_path_factory, django_db_setup, django_db_blocker) -> Iterator[McpEnv]:
    """A migrated database of its own, on the suite's PostgreSQL server, with agents A (in group team) and B,
    and one key per role."""
    tmp = tmp_path_factory.mktemp("mcp")
    db = settings.DATABASES["default"]
    name = f"mcp_{secrets.token_hex(4)}"
    with django_db_blocker.unblock():
        connection.ensure_connection()  # the embedded server starts with the first connection
        _admin_sql(f"CREATE DATABASE {name}")
    query = urllib.parse.urlencode({"host": db["HOST"], "port": db["PORT"]})
    password = urllib.parse.quote(db["PASSWORD"] or "", safe="")
    env = {
        **os.environ,
        "DATABASE_URL": f"postgres://{urllib.parse.quote(db['USER'], safe='')}:{password}@/{name}?{query}",
        "SECRET_KEY": settings.SECRET_KEY,
        "DEBUG": "false",
        "PROMETHEUS_MULTIPROC_DIR": str(tmp / "prometheus"),  # serve's, not the checkout's var/prometheus
    }
    (tmp / "prometheus").mkdir()
    env.pop("MEMORYPLATFORM_API_KEY", None)
    _manage(env, "migrate", "--verbosity", "0")
    output = _manage(env, "shell", "--no-imports", "-c", PROVISION).stdout
    keys = json.loads(next(line for line in output.splitlines() if line.startswith("KEYS="))[5:])
    yield McpEnv(env=env, keys=keys, tmp=tmp)
    with django_db_blocker.unblock():
        _admin_sql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_for(server: subprocess.Popen, base: str, log_path: Path) -> None:
    deadline = time.monotonic() + 30
    while True:
        assert server.poll() is None, log_path.read_text()[-3000:]
        try:
            with urllib.request.urlopen(f"{base}/healthz", timeout=2) as response:  # noqa: S310
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError):
            pass
        assert time.monotonic() < deadline, "the server did not answer /healthz in 30 s"
        time.sleep(0.2)


@contextmanager
def _served(env: dict[str, str], argv: list[str], log_path: Path) -> Iterator[str]:
    """Run a server (``{port}`` in ``argv`` filled with a free port) until the block ends; yields its URL."""
    port = _free_port()
    with log_path.open("w") as log:
        server = subprocess.Popen(  # noqa: S603
            [arg.format(port=port) for arg in argv],
            cwd=BASE_DIR,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_for(server, base, log_path)
        yield base
    finally:
        server.terminate()
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


@pytest.fixture(scope="module")
def http_url(mcp_env: McpEnv) -> Iterator[str]:
    """``manage.py serve`` (uvicorn, memoryplatform.asgi: Django, and the MCP app under /mcp), a free port."""
    argv = [PYTHON, "manage.py", "serve", "--port", "{port}", "--workers", "1", "--no-dream-scheduler"]
    with _served(mcp_env.env, argv, mcp_env.tmp / "serve.log") as base:
        yield base


@pytest.fixture(scope="module")
def wsgi_url(mcp_env: McpEnv) -> Iterator[str]:
    """gunicorn serving memoryplatform.wsgi, for those who run a WSGI server."""
    argv = [str(Path(PYTHON).parent / "gunicorn"), "memoryplatform.wsgi:application"]
    argv += ["--bind", "127.0.0.1:{port}", "--workers", "1", "--timeout", "60"]
    with _served(mcp_env.env, argv, mcp_env.tmp / "gunicorn.log") as base:
        yield base


@pytest.fixture(params=["stdio", "http"])
def transport(request) -> str:
    return request.param


@pytest.fixture
def connect(request, transport: str, mcp_env: McpEnv):
    """``connect(role)``: an async context manager giving a connected ``mcp.Client`` with that role's key."""
    url = request.getfixturevalue("http_url") + "/mcp/" if transport == "http" else None

    @asynccontextmanager
    async def _connect(role: str, *, header: str = "bearer", mode: str = "auto") -> AsyncIterator[Client]:
        raw_key = mcp_env.keys[role]
        if transport == "stdio":
            params = StdioServerParameters(
                command=PYTHON,
                args=["manage.py", "mcp"],
                cwd=str(BASE_DIR),
                env={**mcp_env.env, "MEMORYPLATFORM_API_KEY": raw_key},
            )
            with (mcp_env.tmp / f"stdio-{role}.log").open("a") as errlog:
                async with Client(stdio_client(params, errlog=errlog), mode=mode) as client:
                    yield client
            return
        headers = {"Authorization": f"Bearer {raw_key}"} if header == "bearer" else {"X-API-Key": raw_key}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=30) as http,
            Client(streamable_http_client(url, http_client=http), mode=mode) as client,
        ):
            yield client

    return _connect


def run(main: Callable[[], Awaitable[None]]) -> None:
    """``anyio.run(main)`` on a thread of its own: a session-scoped fixture elsewhere in the suite
    (Playwright's sync API) leaves an event loop running in the main thread, where no other can start."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(anyio.run, main).result()


@asynccontextmanager
async def sessions(connect, *roles: str) -> AsyncIterator[list[Client]]:
    """One connected client per role, started side by side (a stdio server takes a while to start)."""
    clients: dict[str, Client] = {}
    ready = {role: anyio.Event() for role in roles}
    done = anyio.Event()

    async def hold(role: str) -> None:
        async with connect(role) as client:
            clients[role] = client
            ready[role].set()
            await done.wait()

    async with anyio.create_task_group() as tg:
        for role in roles:
            tg.start_soon(hold, role)
        for event in ready.values():
            await event.wait()
        try:
            yield [clients[role] for role in roles]
        finally:
            done.set()


async def call(client: Client, name: str, **arguments: Any) -> tuple[Any, bool]:
    """Call a tool; returns (the JSON of its text result, is_error)."""
    result = await client.call_tool(name, arguments)
    assert len(result.content) == 1 and result.content[0].type == "text"
    return json.loads(result.content[0].text), result.is_error


async def ok(client: Client, name: str, **arguments: Any) -> Any:
    payload, is_error = await call(client, name, **arguments)
    assert not is_error, payload
    return payload


async def error(client: Client, name: str, **arguments: Any) -> str:
    payload, is_error = await call(client, name, **arguments)
    assert is_error and set(payload) == {"error"}, payload
    return payload["error"]


async def tool_names(client: Client) -> set[str]:
    return {tool.name for tool in (await client.list_tools()).tools}


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
    assert listed["admin"] == ALL_TOOLS and len(listed["admin"]) == 8
    assert listed["viewer"] == READ_TOOLS and len(listed["viewer"]) == 5
    assert listed["agent-a"] == ALL_TOOLS - {"delete_all_user_memories"}


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

            found = await ok(client, "search_user_memories", userId=user, query="GREEN")
            assert [e["key"] for e in found] == ["favorite_color"]

            entry = await ok(client, "get_memory_by_key", userId=user, key="language")
            assert entry["value"] == "English" and entry["visibility"] == "global"
            assert await error(client, "get_memory_by_key", userId=user, key="nope") == (
                f"No memory with key 'nope' found for user: {user}"
            )

            assert await ok(client, "count_user_memories", userId=user) == {"userId": user, "count": 2}

            deleted = await ok(client, "delete_user_memory", entryId=color["id"])
            assert deleted == {"entryId": color["id"], "status": "deleted"}
            assert "No memory entry" in await error(client, "delete_user_memory", entryId=color["id"])
            assert (await ok(client, "count_user_memories", userId=user))["count"] == 1

            erased = await ok(client, "delete_all_user_memories", userId=user, confirmation="CONFIRM")
            assert erased == {"userId": user, "entriesDeleted": 1, "status": "deleted"}
            assert (await ok(client, "count_user_memories", userId=user))["count"] == 0

            # Arguments that do not fit a tool's input schema, and unknown tools, are errors too.
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


# --- Transport specifics -----------------------------------------------------------------------------------


def test_stdio_refuses_a_missing_or_bad_key(mcp_env: McpEnv):
    for key, expected in (("", "MEMORYPLATFORM_API_KEY is not set"), ("mp_bad_key", "was refused")):
        result = subprocess.run(  # noqa: S603
            [PYTHON, "manage.py", "mcp"],
            cwd=BASE_DIR,
            env={**mcp_env.env, "MEMORYPLATFORM_API_KEY": key},
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
        assert result.returncode != 0
        assert expected in result.stderr
        assert result.stdout == ""


def test_stdio_checks_the_key_at_every_call(mcp_env: McpEnv):
    """A key revoked while a stdio session is open stops working at its next tool call."""
    raw_key = _manage(mcp_env.env, "createapikey", "--role", "viewer").stdout.strip().splitlines()[-1]
    params = StdioServerParameters(
        command=PYTHON,
        args=["manage.py", "mcp"],
        cwd=str(BASE_DIR),
        env={**mcp_env.env, "MEMORYPLATFORM_API_KEY": raw_key},
    )

    async def main() -> None:
        with (mcp_env.tmp / "stdio-revoked.log").open("a") as errlog:
            async with Client(stdio_client(params, errlog=errlog)) as client:
                assert (await ok(client, "count_user_memories", userId="u-revoke"))["count"] == 0
                _manage(mcp_env.env, "revokeapikey", raw_key.split("_")[1])
                assert "revoked" in await error(client, "count_user_memories", userId="u-revoke")

    run(main)


def test_http_needs_a_key_and_leaves_other_paths_to_django(http_url: str):
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}
    with httpx2.Client(base_url=http_url, timeout=30) as http:
        missing = http.post("/mcp/", json=body, headers=headers)
        assert missing.status_code == 401
        assert missing.json()["code"] == "unauthorized"
        assert missing.headers["www-authenticate"].startswith("Bearer")
        bad = http.post("/mcp/", json=body, headers={**headers, "Authorization": "Bearer mp_0000_nope"})
        assert bad.status_code == 401 and bad.json()["error"] == "Invalid API key."
        assert http.get("/healthz").json() == {"status": "ok"}
        assert http.get("/mcpx").json()["code"] == "not_found"  # Django's JSON 404, not the MCP app


@pytest.mark.parametrize("transport", ["http"])
def test_http_takes_x_api_key_and_the_handshake_era(connect):
    async def main() -> None:
        async with connect("viewer", header="x-api-key") as client:
            assert await tool_names(client) == READ_TOOLS
        # The initialize-handshake era runs each request in the session manager's task group.
        async with connect("agent-b", mode="legacy") as client:
            assert client.protocol_version < "2026"
            assert "delete_all_user_memories" not in await tool_names(client)
            assert (await ok(client, "count_user_memories", userId="nobody"))["count"] == 0

    run(main)


@pytest.mark.parametrize("server", ["http_url", "wsgi_url"])
def test_http_refuses_a_host_outside_allowed_hosts(request, server):
    """``/mcp`` bypasses Django's request handling but not its Host check (DNS rebinding), before the key."""
    http_url = request.getfixturevalue(server)
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}
    with httpx2.Client(base_url=http_url, timeout=30) as http:
        for path in ("/mcp/", "/mcp"):
            refused = http.post(path, json=body, headers={**headers, "Host": "attacker.example"})
            assert refused.status_code == 400
            assert refused.json() == {"error": "Invalid Host header for this server.", "code": "bad_request",
                                      "details": {}}  # fmt: skip
        assert http.post("/mcp/", json=body, headers=headers).status_code == 401  # its own host: the key next


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


# --- HTTP: no stream, the REST API's body limit (issue 16) -------------------------------------------------

_MCP_HEADERS = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}


def _upsert_body(user: str, value: str) -> bytes:
    arguments = {"userId": user, "key": "big", "value": value, "visibility": "global"}
    params = {"name": "upsert_user_memory", "arguments": arguments}
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}).encode()


@pytest.mark.parametrize("server", ["http_url", "wsgi_url"])
def test_http_takes_post_only_and_limits_the_body(request, server, mcp_env: McpEnv):
    """No GET stream to hold open (405, as the MCP spec allows), and the REST API's 1 MB body limit,
    whether the body has a Content-Length or comes chunked."""
    base = request.getfixturevalue(server)
    user = f"{server}-big-body"
    headers = {**_MCP_HEADERS, "Authorization": f"Bearer {mcp_env.keys['admin']}"}
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    with httpx2.Client(base_url=base, timeout=30, headers=headers) as http:
        for method in ("GET", "DELETE", "PUT"):
            refused = http.request(method, "/mcp/")
            assert refused.status_code == 405, (method, refused.text)
            assert refused.headers["allow"] == "POST"
            assert refused.json()["code"] == "method_not_allowed"

        big = _upsert_body(user, "x" * (2 * 1024 * 1024))
        too_large = http.post("/mcp/", content=big, headers={"Content-Type": "application/json"})
        assert too_large.status_code == 413
        assert too_large.json() == {"error": "Request body is too large.", "code": "payload_too_large",
                                    "details": {}}  # fmt: skip

        def chunks(body: bytes) -> Iterator[bytes]:
            for start in range(0, len(body), 64 * 1024):
                yield body[start : start + 64 * 1024]

        chunked = http.post("/mcp/", content=chunks(big), headers={"Content-Type": "application/json"})
        assert chunked.status_code == 413 and chunked.json()["code"] == "payload_too_large"

        json_type = {"Content-Type": "application/json"}
        overhead = len(_upsert_body(user, ""))
        one_over = _upsert_body(user, "x" * (limit + 1 - overhead))
        assert len(one_over) == limit + 1
        assert http.post("/mcp/", content=one_over, headers=json_type).status_code == 413

        under = 1000  # small: a size limit on values is another matter
        taken = http.post("/mcp/", content=chunks(_upsert_body(user, "x" * under)), headers=json_type)
        assert taken.status_code == 200, taken.text
        assert json.loads(taken.json()["result"]["content"][0]["text"])["status"] == "upserted"

    async def main() -> None:
        async with connect_admin(base, mcp_env) as client:
            listed = await ok(client, "list_user_memories", userId=user)
            assert [len(e["value"]) for e in listed["memories"]] == [under]
            await ok(client, "delete_all_user_memories", userId=user, confirmation="CONFIRM")

    run(main)


@asynccontextmanager
async def connect_admin(base: str, mcp_env: McpEnv) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {mcp_env.keys['admin']}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        Client(streamable_http_client(base + "/mcp/", http_client=http)) as client,
    ):
        yield client
