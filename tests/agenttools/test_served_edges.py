"""Issue 33's request edges through the real server, ``manage.py serve`` (uvicorn, ``http_url``), the MCP
tests' server. Raw requests, so the path goes out exactly as written:

- finding 11: a path that is not UTF-8 once percent-decoded is a 400 in the envelope (uvicorn would have
  decoded ``%FF`` and ``%FE`` alike to U+FFFD);
- finding 12: a request line over our limit is a 414 in the envelope under uvicorn, below uvicorn's own
  plain-text limit;
- finding 13: a JSON key given twice is a 400 naming it, at REST and at MCP over HTTP.
"""

import http.client
import json
from typing import Any
from urllib.parse import urlsplit

import pytest

from memoryplatform.text import MAX_REQUEST_TARGET
from tests.agenttools.mcp_harness import McpEnv

MEMORIES = "/usermemorystore/memories"
MCP_HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2025-11-25",
}


@pytest.fixture
def served(http_url: str) -> tuple[str, str]:
    """``(server, base URL)``."""
    return "uvicorn", http_url


def _send(base: str, method: str, path: str, key: str, body: bytes | None = None) -> tuple[int, str, Any]:
    """One request with the path sent as written: status, content type, and the JSON body (or the text)."""
    url = urlsplit(base)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    try:
        headers = {"Authorization": f"Bearer {key}", **(MCP_HEADERS if body is not None else {})}
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        text = response.read().decode("utf-8", "replace")
        kind = response.getheader("Content-Type", "")
        return response.status, kind, json.loads(text) if kind.startswith("application/json") else text
    finally:
        conn.close()


def _is_envelope(answer: Any, code: str) -> bool:
    return isinstance(answer, dict) and set(answer) == {"error", "code", "details"} and answer["code"] == code


@pytest.mark.parametrize(
    "path",
    [
        f"{MEMORIES}/%FF/count",
        f"{MEMORIES}/%FE/count",
        f"{MEMORIES}/%ED%A0%80",
        "/v1/conversations/%C3",
        "/mcp%FF",
    ],
)
def test_an_undecodable_path_is_a_400_in_the_envelope(served, mcp_env: McpEnv, path):
    _, base = served
    status, _, answer = _send(base, "GET", path, mcp_env.keys["agent-a"])
    assert status == 400 and _is_envelope(answer, "bad_request"), (status, answer)
    assert "UTF-8" in answer["error"]


def test_an_over_long_request_line_is_a_414_in_the_envelope_under_uvicorn(http_url: str, mcp_env: McpEnv):
    key = mcp_env.keys["agent-a"]
    status, _, answer = _send(http_url, "GET", f"{MEMORIES}/{'u' * MAX_REQUEST_TARGET}/count", key)
    assert status == 414 and _is_envelope(answer, "uri_too_long"), (status, answer)
    status, _, answer = _send(http_url, "GET", f"{MEMORIES}/u/search?q={'q' * MAX_REQUEST_TARGET}", key)
    assert status == 414 and _is_envelope(answer, "uri_too_long"), (status, answer)
    # Under the limit, the same route answers: the application itself (here, that it takes no "pad").
    status, _, answer = _send(http_url, "GET", f"{MEMORIES}/{'u' * 200}/count?pad={'x' * 15000}", key)
    assert status == 400 and _is_envelope(answer, "bad_request"), (status, answer)
    assert "pad" in answer["details"]["fields"]
    # Past uvicorn's own limit (about 64 KB, documented), uvicorn answers before the application can.
    status, kind, _ = _send(http_url, "GET", f"{MEMORIES}/{'u' * 70_000}/count", key)
    assert status == 400 and kind.startswith("text/plain")


def test_a_duplicate_json_key_is_a_400_at_rest_and_mcp(served, mcp_env: McpEnv):
    _, base = served
    key = mcp_env.keys["agent-a"]
    body = b'{"userId": "dup-user", "key": "k", "value": 1, "userId": "other-user"}'
    status, _, answer = _send(base, "PUT", MEMORIES, key, body)
    assert status == 400 and _is_envelope(answer, "bad_request"), (status, answer)
    assert 'the key "userId" appears more than once' in answer["error"]
    rpc = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "count_user_memories", '
    rpc += b'"arguments": {"userId": "a", "userId": "b"}}}'
    status, _, answer = _send(base, "POST", "/mcp/", key, rpc)
    assert status == 400 and _is_envelope(answer, "bad_request"), (status, answer)
    assert 'the key "userId" appears more than once' in answer["error"]
    # The same call without the second key is answered by the MCP server.
    rpc = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}'
    status, _, answer = _send(base, "POST", "/mcp/", key, rpc)
    assert status == 200 and answer["result"]["tools"], (status, answer)
