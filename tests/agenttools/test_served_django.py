"""How Django is served under ``manage.py serve`` (uvicorn, ``memoryplatform.asgi``: Django's ASGI handler
behind our body and request limits): bodies in, buffered and streamed answers out, HEAD, the request id, the
path as sent, requests beyond the threads, and a client gone while its request waits. Raw requests, so each
goes out exactly as written."""

import http.client
import json
from pathlib import Path
from urllib.parse import quote, urlsplit

import pytest
from django.contrib.staticfiles import finders

from tests.agenttools.mcp_harness import McpEnv

MEMORIES = "/usermemorystore/memories"


@pytest.fixture
def base(http_url: str) -> str:
    return http_url


def _exchange(
    base: str,
    method: str,
    path: str,
    *,
    key: str | None = None,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
    chunked: bool = False,
) -> http.client.HTTPResponse:
    """One request; the answer is read whole (``.data``) before the connection closes."""
    url = urlsplit(base)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    try:
        sent = {**({"Authorization": f"Bearer {key}"} if key else {}), **(headers or {})}
        if body is not None:
            sent.setdefault("Content-Type", "application/json")
        if chunked:
            conn.putrequest(method, path)
            for name, value in {**sent, "Transfer-Encoding": "chunked"}.items():
                conn.putheader(name, value)
            conn.endheaders()
            for start in range(0, len(body or b""), 7):  # small chunks, each its own frame
                piece = (body or b"")[start : start + 7]
                conn.send(b"%x\r\n%s\r\n" % (len(piece), piece))
            conn.send(b"0\r\n\r\n")
        else:
            conn.request(method, path, body=body, headers=sent)
        response = conn.getresponse()
        response.data = response.read()  # type: ignore[attr-defined]
        return response
    finally:
        conn.close()


def _upsert(base: str, key: str, entry: dict, *, chunked: bool = False) -> http.client.HTTPResponse:
    return _exchange(base, "PUT", MEMORIES, key=key, body=json.dumps(entry).encode(), chunked=chunked)


@pytest.mark.parametrize("chunked", [False, True])
def test_a_written_body_reaches_django_whole(base, mcp_env: McpEnv, chunked):
    key = mcp_env.keys["agent-a"]
    value = "tea, " * 190 + "and é"  # near the 1,000-character limit, in small chunks when chunked
    written = _upsert(
        base, key, {"userId": "bridge-user", "key": f"drink-{chunked}", "value": value}, chunked=chunked
    )
    assert written.status in (200, 201), written.data  # type: ignore[attr-defined]
    read = _exchange(base, "GET", f"{MEMORIES}/bridge-user/key/drink-{chunked}", key=key)
    assert read.status == 200
    assert json.loads(read.data)["value"] == value  # type: ignore[attr-defined]


def test_a_buffered_answer_has_its_length_and_head_has_none_of_its_body(base, mcp_env: McpEnv):
    key = mcp_env.keys["agent-a"]
    _upsert(base, key, {"userId": "head-user", "key": "k", "value": "v"})
    got = _exchange(base, "GET", f"{MEMORIES}/head-user", key=key)
    assert got.status == 200 and int(got.getheader("Content-Length")) == len(got.data)  # type: ignore[attr-defined]
    head = _exchange(base, "HEAD", f"{MEMORIES}/head-user", key=key)
    assert head.status == 200 and head.data == b""  # type: ignore[attr-defined]
    assert head.getheader("Content-Length") == got.getheader("Content-Length")


def test_a_streamed_static_file_arrives_whole(base):
    found = finders.find("admin/css/base.css")
    assert found, "Django's admin stylesheet is a static file"
    expected = Path(found).read_bytes()
    got = _exchange(base, "GET", "/static/admin/css/base.css")
    assert got.status == 200
    assert got.data == expected  # type: ignore[attr-defined]
    assert got.getheader("Content-Type", "").startswith("text/css")


def test_the_request_id_sent_comes_back(base, mcp_env: McpEnv):
    got = _exchange(
        base,
        "GET",
        f"{MEMORIES}/rid-user/count",
        key=mcp_env.keys["agent-a"],
        headers={"X-Request-Id": "rid-42"},
    )
    assert got.status == 200 and got.getheader("X-Request-Id") == "rid-42"


def test_an_encoded_slash_in_a_user_id_is_exact(base, mcp_env: McpEnv):
    """The path is read as sent (the ASGI scope's ``raw_path``), so a userId ending in ``/count`` is a user,
    not the count of another."""
    key = mcp_env.keys["agent-a"]
    for user_id in ("slash/count", "slash"):
        assert _upsert(base, key, {"userId": user_id, "key": "k", "value": user_id}).status in (200, 201)
    listed = _exchange(base, "GET", f"{MEMORIES}/{quote('slash/count', safe='')}", key=key)
    assert listed.status == 200, listed.data  # type: ignore[attr-defined]
    assert [e["value"] for e in json.loads(listed.data)] == ["slash/count"]  # type: ignore[attr-defined]
    entry = _exchange(base, "GET", f"{MEMORIES}/{quote('slash/count', safe='')}/key/k?format=json", key=key)
    assert json.loads(entry.data)["userId"] == "slash/count"  # type: ignore[attr-defined]


def test_a_header_spelled_with_an_underscore_is_not_read(base, mcp_env: McpEnv):
    """``X_API_Key`` would land on the same ``HTTP_X_API_KEY`` as ``X-API-Key``: Django's ASGI request drops
    it, as it drops ``X_Forwarded_Proto`` (trusted behind a TLS proxy in its ``-`` spelling only)."""
    path = f"{MEMORIES}/underscore-user/count"
    key = mcp_env.keys["agent-a"]
    assert _exchange(base, "GET", path, headers={"X-API-Key": key}).status == 200
    refused = _exchange(base, "GET", path, headers={"X_API_Key": key})
    assert refused.status == 401, refused.data  # type: ignore[attr-defined]
