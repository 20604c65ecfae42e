"""The MCP test harness: a migrated database and servers of their own (subprocesses), clients per role and
transport, and the small helpers the MCP tests share. The fixtures are package-scoped and reach the tests
through tests/agenttools/conftest.py: both MCP test modules share one database and one server of each kind."""

import json
import os
import secrets
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
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

from tests.helpers import free_port, stop_process, wait_ready

BASE_DIR = Path(settings.BASE_DIR)
PYTHON = sys.executable
READ_TOOLS = {
    "list_user_memories",
    "get_visible_memories",
    "search_user_memories",
    "get_memory_by_key",
    "count_user_memories",
}
ALL_TOOLS = READ_TOOLS | {
    "upsert_user_memory",
    "delete_user_memory",
    "delete_all_user_memories",
    "extract_memories",
}
TASK_TOOLS = {"create_task", "complete_task", "list_my_tasks"}

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


@pytest.fixture(scope="package")
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
        "EMBEDDINGS_INLINE_MAX_CHARS": "48",  # as tests/conftest.py: a search right after a write finds it
    }
    (tmp / "prometheus").mkdir()
    env.pop("MEMORYPLATFORM_API_KEY", None)
    _manage(env, "migrate", "--verbosity", "0")
    output = _manage(env, "shell", "--no-imports", "-c", PROVISION).stdout
    keys = json.loads(next(line for line in output.splitlines() if line.startswith("KEYS="))[5:])
    yield McpEnv(env=env, keys=keys, tmp=tmp)
    with django_db_blocker.unblock():
        _admin_sql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@contextmanager
def _served(env: dict[str, str], argv: list[str], log_path: Path) -> Iterator[str]:
    """Run a server (``{port}`` in ``argv`` filled with a free port) until the block ends; yields its URL."""
    port = free_port()
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
        wait_ready(server, base, log_path)
        yield base
    finally:
        stop_process(server)


@pytest.fixture(scope="package")
def http_url(mcp_env: McpEnv) -> Iterator[str]:
    """``manage.py serve`` (uvicorn, config.asgi: Django, and the MCP app under /mcp), a free port."""
    argv = [PYTHON, "manage.py", "serve", "--port", "{port}", "--workers", "1", "--no-background"]
    with _served(mcp_env.env, argv, mcp_env.tmp / "serve.log") as base:
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
            async with stdio_session(mcp_env, role, mode=mode) as client:
                yield client
            return
        headers = {"Authorization": f"Bearer {raw_key}"} if header == "bearer" else {"X-API-Key": raw_key}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=30) as http,
            Client(streamable_http_client(url, http_client=http), mode=mode) as client,
        ):
            yield client

    return _connect


@asynccontextmanager
async def stdio_session(
    mcp_env: McpEnv, role: str, *, mode: str = "auto", **env: str
) -> AsyncIterator[Client]:
    """A client of its own ``manage.py mcp`` with that role's key, and ``env`` over the harness's settings."""
    params = StdioServerParameters(
        command=PYTHON,
        args=["manage.py", "mcp"],
        cwd=str(BASE_DIR),
        env={**mcp_env.env, **env, "MEMORYPLATFORM_API_KEY": mcp_env.keys[role]},
    )
    log_path = mcp_env.tmp / f"stdio-{role}.log"
    with log_path.open("a") as errlog:
        start = errlog.tell()
        async with AsyncExitStack() as stack:
            session = Client(stdio_client(params, errlog=errlog), mode=mode)
            try:
                client = await stack.enter_async_context(session)
            except Exception as exc:  # the server's own words say why it did not start: they go with it
                errlog.flush()
                said = log_path.read_text(errors="replace")[start:][-3000:]
                raise AssertionError(f"manage.py mcp did not start ({exc!r}); it said:\n{said}") from exc
            yield client


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
