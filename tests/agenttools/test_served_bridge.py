"""How Django is served under ``manage.py serve`` (uvicorn, ``memoryplatform.asgi_wsgi``, the thread bridge):
bodies in, buffered and streamed answers out, HEAD, the request id, the path as sent; and the bridge's reasons
and limits: a thread keeps its connection, more requests than threads, clients gone while their requests
wait (its shutdown is in ``tests/memoryplatform/test_serve.py``). Raw requests, so each goes out exactly as
written."""

import http.client
import json
import socket
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import quote, urlsplit

import psycopg
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
    """The bridge passes the path as sent (the ASGI ``raw_path`` as ``RAW_URI``), so a userId ending in
    ``/count`` is a user, not the count of another."""
    key = mcp_env.keys["agent-a"]
    for user_id in ("slash/count", "slash"):
        assert _upsert(base, key, {"userId": user_id, "key": "k", "value": user_id}).status in (200, 201)
    listed = _exchange(base, "GET", f"{MEMORIES}/{quote('slash/count', safe='')}", key=key)
    assert listed.status == 200, listed.data  # type: ignore[attr-defined]
    assert [e["value"] for e in json.loads(listed.data)] == ["slash/count"]  # type: ignore[attr-defined]
    entry = _exchange(base, "GET", f"{MEMORIES}/{quote('slash/count', safe='')}/key/k?format=json", key=key)
    assert json.loads(entry.data)["userId"] == "slash/count"  # type: ignore[attr-defined]


def test_a_header_spelled_with_an_underscore_is_not_read(base, mcp_env: McpEnv):
    """``X_API_Key`` would land on the same ``HTTP_X_API_KEY`` as ``X-API-Key``: the bridge drops it, as
    it drops ``X_Forwarded_Proto`` (trusted behind a TLS proxy in its ``-`` spelling only)."""
    path = f"{MEMORIES}/underscore-user/count"
    key = mcp_env.keys["agent-a"]
    assert _exchange(base, "GET", path, headers={"X-API-Key": key}).status == 200
    refused = _exchange(base, "GET", path, headers={"X_API_Key": key})
    assert refused.status == 401, refused.data  # type: ignore[attr-defined]


# --- The bridge's reasons and limits (issue 48) -----------------------------------------------------------
# The server runs one worker with serve's default of 4 threads.


def _many(base: str, key: str, paths: list[str]) -> list[tuple[int, bytes]]:
    """Each path requested at once, from a connection of its own."""

    def one(path: str) -> tuple[int, bytes]:
        got = _exchange(base, "GET", path, key=key)
        return got.status, got.data  # type: ignore[attr-defined]

    with ThreadPoolExecutor(max_workers=len(paths)) as pool:
        return list(pool.map(one, paths))


def _backends(mcp_env: McpEnv) -> set[int]:
    """The request threads' sessions open on the served database, but this one: not the named ones (the
    broker's, which a write's nudge may open, and the listeners')."""
    others = "datname = current_database() AND pid <> pg_backend_pid() AND application_name = ''"
    with psycopg.connect(mcp_env.env["DATABASE_URL"]) as conn:
        rows = conn.execute(f"SELECT pid FROM pg_stat_activity WHERE {others}").fetchall()  # noqa: S608
    return {pid for (pid,) in rows}


def test_a_thread_keeps_its_connection(base, mcp_env: McpEnv):
    """Once each thread has run a request, 32 more open no connection: every one of them runs on a
    connection a thread already held (``CONN_MAX_AGE``)."""
    key = mcp_env.keys["agent-a"]
    _upsert(base, key, {"userId": "kept-user", "key": "k", "value": "v"})
    assert {status for status, _ in _many(base, key, [f"{MEMORIES}/kept-user"] * 8)} == {200}
    held = _backends(mcp_env)
    for _ in range(4):
        assert {status for status, _ in _many(base, key, [f"{MEMORIES}/kept-user"] * 8)} == {200}
    assert held and _backends(mcp_env) <= held


def test_more_requests_than_threads_all_answer(base, mcp_env: McpEnv):
    """Three times the worker's threads at once: the requests past its 4 wait (as coroutines) and are
    answered, each with its own user's answer."""
    key = mcp_env.keys["agent-a"]
    for n in range(12):
        _upsert(base, key, {"userId": f"many-{n}", "key": "k", "value": f"value {n}"})
    answers = _many(base, key, [f"{MEMORIES}/many-{n}" for n in range(12)])
    assert [status for status, _ in answers] == [200] * 12
    assert [json.loads(data)[0]["value"] for _, data in answers] == [f"value {n}" for n in range(12)]


def test_clients_gone_while_their_requests_wait_free_their_threads(base, mcp_env: McpEnv):
    """Twice the threads' worth of clients send a request and hang up at once, while it waits or runs: had a
    gone client kept its thread, the worker would have none left, and the requests after would never be
    answered."""
    url = urlsplit(base)
    key = mcp_env.keys["agent-a"]
    _upsert(base, key, {"userId": "gone-user", "key": "k", "value": "v"})
    for _ in range(3):
        for _ in range(8):
            with socket.create_connection((url.hostname, url.port), timeout=5) as sock:
                sock.sendall(
                    f"GET {MEMORIES}/gone-user/search?q=v HTTP/1.1\r\nHost: {url.netloc}\r\n"
                    f"Authorization: Bearer {key}\r\n\r\n".encode()
                )
        answers = _many(base, key, [f"{MEMORIES}/gone-user"] * 8)
        assert [status for status, _ in answers] == [200] * 8
