"""The MCP server's transports: stdio's key checks; streamable HTTP's key headers, hosts, methods and body
limit (served by uvicorn), through real clients and raw requests."""

import json
import subprocess
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager

import httpx2
import pytest
from django.conf import settings
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from tests.agenttools.mcp_harness import (
    BASE_DIR,
    PYTHON,
    READ_TOOLS,
    McpEnv,
    _manage,
    error,
    ok,
    run,
    tool_names,
)

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


def test_http_refuses_a_host_outside_allowed_hosts(http_url: str):
    """``/mcp`` bypasses Django's request handling but not its Host check (DNS rebinding), before the key."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}
    with httpx2.Client(base_url=http_url, timeout=30) as http:
        for path in ("/mcp/", "/mcp"):
            refused = http.post(path, json=body, headers={**headers, "Host": "attacker.example"})
            assert refused.status_code == 400
            assert refused.json() == {"error": "Invalid Host header for this server.", "code": "bad_request",
                                      "details": {}}  # fmt: skip
        assert http.post("/mcp/", json=body, headers=headers).status_code == 401  # its own host: the key next


# --- HTTP: no stream, the REST API's body limit (issue 16) -------------------------------------------------

_MCP_HEADERS = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}


def _upsert_body(user: str, value: str) -> bytes:
    arguments = {"userId": user, "key": "big", "value": value, "visibility": "global"}
    params = {"name": "upsert_user_memory", "arguments": arguments}
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}).encode()


def test_http_takes_post_only_and_limits_the_body(http_url: str, mcp_env: McpEnv):
    """No GET stream to hold open (405, as the MCP spec allows), and the REST API's 1 MB body limit,
    whether the body has a Content-Length or comes chunked."""
    base = http_url
    user = "http-big-body"
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
