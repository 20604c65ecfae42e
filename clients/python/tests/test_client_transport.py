"""Retries, backoff and error mapping, over httpx's MockTransport (the live-server tests in the platform's
suite, tests/client/, cover every call against the real API)."""

import asyncio
import json
import socket
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import httpx
import pytest
from memoryplatform_client import (
    MAX_QUERY_CHARS,
    APIConnectionError,
    AsyncMemoryPlatform,
    BadRequestError,
    CapacityError,
    MemoryPlatform,
    NotFoundError,
    QueryTooLongError,
    RateLimitedError,
    ServerError,
    UnavailableError,
)
from memoryplatform_client._core import RetryPolicy, retry_after_seconds
from memoryplatform_client.cli import main as cli_main

Handler = Callable[[httpx.Request], httpx.Response]


def _envelope(status: int, code: str, error: str = "nope", **headers: str) -> httpx.Response:
    return httpx.Response(status, json={"error": error, "code": code, "details": {"x": 1}}, headers=headers)


def _scripted(*answers: httpx.Response | Exception) -> tuple[Handler, list[httpx.Request]]:
    """A handler that gives the answers in turn (raising the exceptions), and the requests it got."""
    seen: list[httpx.Request] = []
    queue = list(answers)

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        answer = queue.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    return handle, seen


def _client(handler: Handler, **options: object) -> MemoryPlatform:
    return MemoryPlatform("http://mp.test", "mp_key", transport=httpx.MockTransport(handler), **options)  # type: ignore[arg-type]


def test_get_is_retried_on_503_and_429_then_succeeds():
    handle, seen = _scripted(
        _envelope(503, "unavailable", **{"Retry-After": "0"}),
        _envelope(429, "rate_limited", **{"Retry-After": "0"}),
        httpx.Response(200, json={"userId": "u", "count": 3}),
    )
    assert _client(handle).count_memories("u") == 3
    assert len(seen) == 3
    assert seen[0].headers["Authorization"] == "Bearer mp_key"


def test_put_and_delete_are_retried_post_is_not():
    handle, seen = _scripted(_envelope(503, "unavailable", **{"Retry-After": "0"}), httpx.Response(204))
    _client(handle).delete_memory(7)
    assert [r.method for r in seen] == ["DELETE", "DELETE"]

    handle, seen = _scripted(_envelope(503, "unavailable", **{"Retry-After": "0"}))
    with pytest.raises(UnavailableError) as refused:
        _client(handle).create_conversation("u")
    assert len(seen) == 1 and refused.value.retry_after == 0


def test_retries_stop_after_max_retries_with_the_last_error():
    handle, seen = _scripted(*[_envelope(429, "rate_limited", **{"Retry-After": "0"})] * 3)
    with pytest.raises(RateLimitedError):
        _client(handle, max_retries=2).get_me()
    assert len(seen) == 3


def test_connection_errors_are_retried_for_idempotent_calls_only():
    handle, seen = _scripted(httpx.ConnectError("refused"), httpx.Response(200, json=[]))
    client = _client(handle)
    client.retry_policy = RetryPolicy(max_retries=2, backoff=0.0)
    assert client.list_tools() == []
    assert len(seen) == 2

    handle, seen = _scripted(httpx.ConnectError("refused"))
    with pytest.raises(APIConnectionError):
        _client(handle).invoke_tool("rememberFact", "u", {})
    assert len(seen) == 1


def test_errors_carry_the_envelope():
    handle, _ = _scripted(_envelope(404, "not_found", "No memory with key 'k' found for user: u"))
    with pytest.raises(NotFoundError) as missing:
        _client(handle).get_memory_by_key("u", "k")
    assert (missing.value.status, missing.value.code, missing.value.details) == (404, "not_found", {"x": 1})
    assert missing.value.error == "No memory with key 'k' found for user: u"

    handle, _ = _scripted(_envelope(409, "capacity"))
    with pytest.raises(CapacityError):
        _client(handle).upsert_memory("u", "k", 1)

    handle, _ = _scripted(httpx.Response(502, text="<html>bad gateway</html>"))
    with pytest.raises(ServerError) as broken:
        _client(handle, max_retries=0).get_me()
    assert broken.value.code == "server_error" and "bad gateway" in broken.value.error


def test_paths_are_encoded_and_options_become_the_servers_names():
    handle, seen = _scripted(httpx.Response(200, json=[]), httpx.Response(200, json={"id": "1"}))
    client = _client(handle)
    client.recall_memories("org/u 1", agent_id="a", group_ids=["g1", "g2"], q="tea", limit=5)
    client.upsert_memory("u", "k", {"v": 1}, visibility="group", group_ids=["g1"], turn_id="t")
    assert seen[0].url.raw_path == (
        b"/usermemorystore/memories/org%2Fu%201/visible?agentId=a&groupId=g1&groupId=g2&limit=5&q=tea"
    )
    assert json.loads(seen[1].content) == {
        "userId": "u",
        "key": "k",
        "value": {"v": 1},
        "visibility": "group",
        "groupIds": ["g1"],
        "turnId": "t",
    }


def test_retry_after_as_seconds_or_a_date_and_the_backoff_without_it():
    later = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    assert retry_after_seconds(httpx.Response(503, headers={"Retry-After": "2"})) == 2.0
    assert 25 <= retry_after_seconds(httpx.Response(503, headers={"Retry-After": later})) <= 30
    assert retry_after_seconds(httpx.Response(503, headers={"Retry-After": "3600"})) == 60.0
    policy = RetryPolicy(backoff=0.5, max_backoff=8.0)
    assert policy.delay(0, httpx.Response(503, headers={"Retry-After": "2"})) == 2.0
    assert 0.25 <= policy.delay(0, None) <= 0.5
    assert 4.0 <= policy.delay(10, None) <= 8.0


def test_async_client_retries_the_same_way():
    handle, seen = _scripted(
        _envelope(503, "unavailable", **{"Retry-After": "0"}), httpx.Response(200, json=[])
    )
    post_handle, post_seen = _scripted(_envelope(503, "unavailable", **{"Retry-After": "0"}))

    async def scenario() -> None:
        async with AsyncMemoryPlatform(
            "http://mp.test", "k", transport=httpx.MockTransport(handle)
        ) as client:
            assert await client.list_memories("u") == []
        async with AsyncMemoryPlatform(
            "http://mp.test", "k", transport=httpx.MockTransport(post_handle)
        ) as client:
            with pytest.raises(UnavailableError):
                await client.append_message("c", "user", "hi")

    asyncio.run(scenario())
    assert len(seen) == 2 and len(post_seen) == 1


KEY = "mp_1a2b3c4d_" + "s" * 43
NOBODY = "http://127.0.0.1:9"  # the discard port: nothing answers, so the key is not tried


def _checkout(root):
    (root / ".venv" / "bin").mkdir(parents=True)
    (root / ".venv" / "bin" / "python").write_text("")
    (root / "manage.py").write_text("")
    return root


def test_mcp_config_prints_http_and_stdio(capsys, tmp_path):
    assert cli_main(["mcp-config", "--url", NOBODY, "--key", KEY]) == 0
    printed = capsys.readouterr()
    http = json.loads(printed.out)["mcpServers"]["memoryplatform"]
    assert http == {"type": "http", "url": f"{NOBODY}/mcp/", "headers": {"Authorization": f"Bearer {KEY}"}}
    assert "did not answer" in printed.err and ".mcp.json" in printed.err
    checkout = _checkout(tmp_path)
    assert (
        cli_main(
            ["mcp-config", "--url", NOBODY, "--key", KEY, "--transport", "stdio", "--checkout", str(checkout)]
        )
        == 0
    )
    stdio = json.loads(capsys.readouterr().out)["mcpServers"]["memoryplatform"]
    assert stdio == {
        "command": str(checkout / ".venv" / "bin" / "python"),
        "args": [str(checkout / "manage.py"), "mcp"],
        "env": {"MEMORYPLATFORM_API_KEY": KEY},
    }


def test_mcp_config_for_stdio_talks_to_no_server(capsys, tmp_path):
    """stdio runs the checkout's ``manage.py mcp``: no server is probed, not the one at --url (here a socket
    that listens and notes a connection) nor the default http://127.0.0.1:8000."""
    with socket.create_server(("127.0.0.1", 0)) as listening:
        listening.settimeout(0)
        url = f"http://127.0.0.1:{listening.getsockname()[1]}"
        argv = ["mcp-config", "--key", KEY, "--transport", "stdio", "--checkout", str(_checkout(tmp_path))]
        assert cli_main([*argv, "--url", url]) == 0
        with pytest.raises(BlockingIOError):
            listening.accept()  # nobody knocked
    printed = capsys.readouterr()
    assert json.loads(printed.out)["mcpServers"]["memoryplatform"]["args"][1] == "mcp"
    assert "did not answer" not in printed.err and "127.0.0.1" not in printed.err
    done = subprocess.run(  # noqa: S603 (this interpreter, fixed arguments)
        [sys.executable, "-m", "memoryplatform_client.cli", *argv],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0 and "did not answer" not in done.stderr  # as a user runs it, no --url
    assert json.loads(done.stdout)["mcpServers"]["memoryplatform"]["env"] == {"MEMORYPLATFORM_API_KEY": KEY}


@pytest.mark.parametrize(
    ("client", "transport", "servers_key", "server_type"),
    [
        ("cursor", "http", "mcpServers", None),
        ("vscode", "http", "servers", "http"),
        ("vscode", "stdio", "servers", "stdio"),
        ("claude-desktop", "stdio", "mcpServers", None),
    ],
)
def test_mcp_config_prints_each_clients_format(capsys, tmp_path, client, transport, servers_key, server_type):
    argv = ["mcp-config", "--url", NOBODY, "--key", KEY, "--client", client, "--transport", transport]
    assert cli_main([*argv, "--checkout", str(_checkout(tmp_path))]) == 0
    (server,) = json.loads(capsys.readouterr().out)[servers_key].values()
    assert server.get("type") == server_type


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--checkout", "/nonexistent", "--transport", "stdio"], "/nonexistent is not a platform checkout"),
        (["--client", "claude-desktop"], "stdio only"),
        (["--url", "file:///etc/passwd"], "--url must be an http"),
    ],
)
def test_mcp_config_refuses_what_cannot_work(capsys, argv, says):
    assert cli_main(["mcp-config", "--url", NOBODY, "--key", KEY, *argv]) == 1
    printed = capsys.readouterr()
    assert printed.out == "" and says in printed.err


@pytest.mark.parametrize("key", ["mp_k", "sk-abc", "mp_1A2B3C4D_" + "s" * 43, "mp_1a2b3c4d_short"])
def test_mcp_config_refuses_a_key_of_another_shape(capsys, key):
    assert cli_main(["mcp-config", "--url", NOBODY, "--key", key]) == 1
    assert "does not look like a platform key" in capsys.readouterr().err


def test_a_server_error_is_not_retried_even_for_an_idempotent_call():
    """A 500 ``server_error`` is the request's failure, not an outage (issue 33): sending it again would fail
    again, so only 503 ``unavailable`` (and 429) are retried. Its request id stays readable for a report."""
    failed = httpx.Response(
        500,
        json={"error": "Internal server error.", "code": "server_error", "details": {"requestId": "r-1"}},
        headers={"X-Request-Id": "r-1"},
    )
    handle, seen = _scripted(failed, httpx.Response(200, json={"userId": "u", "count": 3}))
    with pytest.raises(ServerError) as refused:
        _client(handle).count_memories("u")
    assert len(seen) == 1
    assert not isinstance(refused.value, UnavailableError)
    assert refused.value.details == {"requestId": "r-1"}


def test_a_query_over_the_servers_limit_is_refused_before_it_is_sent():
    handle, seen = _scripted(*[httpx.Response(200, json=[]) for _ in range(4)])
    mp = _client(handle)
    too_long, at_limit = "q" * (MAX_QUERY_CHARS + 1), "q" * MAX_QUERY_CHARS
    refusals = [
        lambda q: mp.search_memories("u1", q, mode="hybrid"),
        lambda q: mp.search_all_memories(q),
        lambda q: mp.recall_memories("u1", q=q),
        lambda q: mp.get_context("c1", q=q),
    ]
    for call in refusals:
        with pytest.raises(QueryTooLongError) as raised:
            call(too_long)
        error = raised.value
        assert isinstance(error, BadRequestError) and (error.status, error.code) == (400, "bad_request")
        assert error.details == {"limit": "MAX_QUERY_CHARS", "max": MAX_QUERY_CHARS, "length": len(too_long)}
    assert seen == []  # nothing was sent
    for call in refusals:
        call(at_limit)
    assert [len(request.url.params["q"]) for request in seen] == [MAX_QUERY_CHARS] * 4

    async def scenario() -> None:
        async with AsyncMemoryPlatform("http://mp.test", "k", transport=httpx.MockTransport(handle)) as amp:
            with pytest.raises(QueryTooLongError):
                await amp.search_memories("u1", too_long)

    asyncio.run(scenario())
    assert len(seen) == 4


def test_clients_load_the_ca_bundle_once_a_process_not_once_a_client(monkeypatch):
    """Making an httpx client makes a TLS context, which loads the whole CA bundle; the clients share one."""
    import ssl

    loads = []
    load = ssl.SSLContext.load_verify_locations

    def counted(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        loads.append(args or kwargs)
        return load(self, *args, **kwargs)

    monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", counted)
    clients = [MemoryPlatform("https://memory.example", "mp_key") for _ in range(3)]
    async_client = AsyncMemoryPlatform("https://memory.example", "mp_key")
    assert len(loads) <= 1  # the first client of the process makes the shared context, if none did before
    for client in clients:
        client.close()
    asyncio.run(async_client.close())
