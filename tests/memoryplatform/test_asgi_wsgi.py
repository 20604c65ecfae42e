"""The bridge that runs Django under the ASGI front (``memoryplatform.asgi_wsgi.WsgiOnThreads``), with small
WSGI apps standing in for Django's answers: the cases a real server rarely shows on demand (a stream of
thousands of pieces, an app failing before or during its answer, a client gone mid-stream, a legacy
``write()``). Django's own answers through real servers are in tests/agenttools/test_served_bridge.py."""

import asyncio
import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pytest

from memoryplatform import requestid
from memoryplatform.asgi_wsgi import STREAM_COALESCE, WsgiOnThreads, environ_of

SCOPE = {
    "type": "http",
    "http_version": "1.1",
    "method": "POST",
    "scheme": "http",
    "path": "/usermemorystore/memories/caf\u00e9 user",
    "raw_path": b"/usermemorystore/memories/caf%C3%A9%20user",
    "query_string": b"q=a%2Fb&x=1",
    "root_path": "",
    "headers": [
        (b"host", b"testserver"),
        (b"content-type", b"application/json"),
        (b"content-length", b"2"),
        (b"accept", b"text/html"),
        (b"accept", b"application/json"),
    ],
    "client": ("10.0.0.7", 5151),
    "server": ("testserver", 8000),
}


class Stream:
    """A streamed WSGI answer: ``pieces`` pieces, optionally failing after ``fail_after`` of them; records
    the thread that closed it."""

    def __init__(self, pieces: int, *, fail_after: int | None = None) -> None:
        self.pieces, self.fail_after = pieces, fail_after
        self.made = 0
        self.closed_on: list[str] = []

    def __iter__(self) -> Iterator[bytes]:
        for number in range(self.pieces):
            if number == self.fail_after:
                raise RuntimeError("the stream broke")
            self.made += 1
            yield b"%d\n" % number

    def close(self) -> None:
        self.closed_on.append(threading.current_thread().name)


def _serve(
    app: Callable[..., Iterable[bytes]], *, fail_send_after: int | None = None
) -> list[dict[str, Any]]:
    """The messages the bridge sends for one request to ``app`` (the body ``{}``), with the request id "rid-1"
    set as the ASGI front sets it."""
    messages: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        if fail_send_after is not None and len(messages) >= fail_send_after:
            raise OSError("the client is gone")
        messages.append(message)

    async def main() -> None:
        token = requestid.current.set("rid-1")
        try:
            await WsgiOnThreads(app, threads=2)(SCOPE, b"{}", send)
        finally:
            requestid.current.reset(token)

    asyncio.run(main())
    return messages


def _body(messages: list[dict[str, Any]]) -> bytes:
    return b"".join(m.get("body", b"") for m in messages if m["type"] == "http.response.body")


def test_the_environ_is_the_request_as_pep_3333_has_it():
    environ = environ_of(SCOPE, b"{}")
    assert environ["REQUEST_METHOD"] == "POST"
    assert environ["PATH_INFO"] == "/usermemorystore/memories/caf\u00e9 user".encode().decode("latin-1")
    assert environ["QUERY_STRING"] == "q=a%2Fb&x=1"
    assert environ["RAW_URI"] == "/usermemorystore/memories/caf%C3%A9%20user?q=a%2Fb&x=1"
    assert (environ["CONTENT_TYPE"], environ["CONTENT_LENGTH"]) == ("application/json", "2")
    assert environ["HTTP_ACCEPT"] == "text/html,application/json"
    assert (environ["REMOTE_ADDR"], environ["SERVER_NAME"], environ["SERVER_PORT"]) == (
        "10.0.0.7",
        "testserver",
        "8000",
    )
    assert environ["wsgi.input"].read() == b"{}"


def test_a_header_spelled_with_an_underscore_cannot_pass_for_one_spelled_with_a_dash():
    scope = {**SCOPE, "headers": [(b"x-forwarded-proto", b"http"), (b"x_forwarded_proto", b"https")]}
    environ = environ_of(scope, b"")
    assert environ["HTTP_X_FORWARDED_PROTO"] == "http"
    assert not any("_forwarded_proto" in key.lower() and key != "HTTP_X_FORWARDED_PROTO" for key in environ)


def test_a_buffered_answer_is_one_start_and_one_body_closed_on_its_thread():
    closed_on: list[str] = []
    seen: dict[str, Any] = {}

    class Answer(list):
        streaming = False

        def close(self) -> None:
            closed_on.append(threading.current_thread().name)

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        seen.update(thread=threading.current_thread().name, request_id=requestid.current.get())
        seen["body"] = environ["wsgi.input"].read()
        start_response("201 Created", [("Content-Type", "application/json"), ("X-Thing", "1")])
        return Answer([b'{"a":', b"1}"])

    messages = _serve(app)
    assert [m["type"] for m in messages] == ["http.response.start", "http.response.body"]
    assert messages[0]["status"] == 201
    assert (b"x-thing", b"1") in messages[0]["headers"]
    assert messages[1] == {"type": "http.response.body", "body": b'{"a":1}'}
    assert seen["body"] == b"{}" and seen["request_id"] == "rid-1"
    assert seen["thread"].startswith("django") and closed_on == [seen["thread"]]


def test_a_long_stream_arrives_whole_in_order_and_in_fewer_messages():
    stream = Stream(20_000)

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        start_response("200 OK", [("Content-Type", "text/plain")])
        return stream

    messages = _serve(app)
    assert messages[0]["type"] == "http.response.start"
    assert _body(messages) == b"".join(b"%d\n" % n for n in range(20_000))
    bodies = [m for m in messages if m["type"] == "http.response.body"]
    assert all(m.get("more_body") for m in bodies[:-1]) and not bodies[-1].get("more_body")
    assert len(bodies) < 20_000 and all(len(m["body"]) <= STREAM_COALESCE + 8 for m in bodies)
    assert len(stream.closed_on) == 1 and stream.closed_on[0].startswith("django")


def test_an_app_that_fails_before_answering_is_a_500_in_the_envelope(caplog):
    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        raise RuntimeError("broken before the answer")

    with caplog.at_level(logging.ERROR, logger="memoryplatform.asgi_wsgi"):
        messages = _serve(app)
    assert messages[0]["status"] == 500
    assert (b"content-type", b"application/json") in messages[0]["headers"]
    assert _body(messages) == (
        b'{"error": "Internal server error.", "code": "server_error", "details": {"requestId": "rid-1"}}'
    )
    # Logged by its type and frames, not its message, which may hold a user id (memoryplatform.logsafe).
    # (The frames show the source line that raised it, this test's own text.)
    assert "Traceback" in caplog.text and caplog.text.rstrip().endswith("RuntimeError")
    assert "RuntimeError: broken before the answer" not in caplog.text


def test_a_stream_that_breaks_midway_ends_the_connection_and_is_closed():
    stream = Stream(10, fail_after=5)

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        start_response("200 OK", [])
        return stream

    with pytest.raises(RuntimeError, match="the stream broke"):
        _serve(app)  # the server then closes the connection: the client sees an incomplete answer
    assert len(stream.closed_on) == 1


def test_a_client_gone_midstream_stops_the_stream_and_closes_it():
    stream = Stream(1_000_000)

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        start_response("200 OK", [])
        return stream

    with pytest.raises(OSError, match="the client is gone"):
        _serve(app, fail_send_after=2)
    assert stream.made < 1_000_000 and len(stream.closed_on) == 1


def test_a_legacy_write_and_a_replaced_status_are_honoured():
    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        start_response("200 OK", [])
        try:
            raise ValueError("changed its mind")
        except ValueError as error:
            write = start_response(
                "503 Service Unavailable", [("Retry-After", "1")], (ValueError, error, None)
            )
        write(b"written, ")
        return [b"then returned"]

    messages = _serve(app)
    assert messages[0]["status"] == 503 and messages[0]["headers"] == [(b"retry-after", b"1")]
    assert _body(messages) == b"written, then returned"


def test_an_app_that_never_starts_its_answer_is_a_500():
    messages = _serve(lambda environ, start_response: [b"no status"])
    assert messages[0]["status"] == 500
