"""Small ASGI pieces shared by the ASGI front (``config/asgi.py``) and the MCP app: read a request
body within the REST API's size limit and in bounded time, hand it on, and answer in the error envelope.

A body is read as it arrives, whatever its framing: a ``Content-Length`` over the limit is refused before a
byte is read, and a chunked body (no ``Content-Length``) is counted as it comes and refused once it passes the
limit. A client that trickles its body holds one coroutine, and only for ``BODY_TIMEOUT`` seconds.
"""

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import quote, unquote_to_bytes

from django.conf import settings

from memoryplatform.api.errors import envelope
from memoryplatform.text import duplicate_key_problem, path_bytes_problem, target_too_long

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

BODY_TIMEOUT = 30.0
"""Seconds a client has to send its whole request body."""


class BodyRefused(Exception):
    """The body cannot be taken: ``status`` and the envelope's ``code`` and message say why."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


class ClientGone(Exception):
    """The client disconnected before its body was complete: there is no one to answer."""


def body_limit() -> int | None:
    """The largest body taken, in bytes: the REST API's ``DATA_UPLOAD_MAX_MEMORY_SIZE`` (``None``: none)."""
    return settings.DATA_UPLOAD_MAX_MEMORY_SIZE


def _too_large() -> BodyRefused:
    return BodyRefused(413, "payload_too_large", "Request body is too large.")


def _declared_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name.lower() == b"content-length":
            try:
                return int(value)
            except ValueError:
                raise BodyRefused(400, "bad_request", "Invalid Content-Length header.") from None
    return None


async def read_body(scope: Scope, receive: Receive, *, timeout: float = BODY_TIMEOUT) -> bytes:
    """The whole request body, or :class:`BodyRefused` (413 over the limit, 408 too slow) or
    :class:`ClientGone`."""
    limit = body_limit()
    declared = _declared_length(scope)
    if limit is not None and declared is not None and declared > limit:
        raise _too_large()
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(timeout):
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    raise ClientGone
                chunk = message.get("body", b"")
                size += len(chunk)
                if limit is not None and size > limit:
                    raise _too_large()
                chunks.append(chunk)
                if not message.get("more_body", False):
                    return b"".join(chunks)
    except TimeoutError:
        raise BodyRefused(408, "request_timeout", "The request body did not arrive in time.") from None


def replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that gives the body already read as one message, then listens to the client again
    (for its disconnect)."""
    sent = False

    async def receive_again() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return receive_again


def with_length(scope: Scope, length: int) -> Scope:
    """The scope of a request whose body has been read: its length in ``Content-Length``, no chunked framing
    (a WSGI app reads ``CONTENT_LENGTH`` bytes)."""
    framing = (b"content-length", b"transfer-encoding")
    headers = [(name, value) for name, value in scope["headers"] if name.lower() not in framing]
    return {**scope, "headers": [*headers, (b"content-length", str(length).encode())]}


async def send_json(
    send: Send, status: int, body: dict[str, Any], headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    payload = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload})


async def send_error(
    send: Send,
    status: int,
    message: str,
    code: str,
    headers: list[tuple[bytes, bytes]] | None = None,
    *,
    details: dict[str, Any] | None = None,
) -> None:
    """An error in the API's envelope, ``{"error", "code", "details"}``."""
    await send_json(send, status, envelope(message, code, details), headers)


DRAIN_BYTES = 16 * 1024 * 1024
DRAIN_SECONDS = 5.0


async def _drain(receive: Receive) -> None:
    """Read and drop what the client still sends of a refused body, a bounded amount for a bounded time, so
    that it can read the refusal rather than a reset connection (the server stops reading once it answers)."""
    dropped = 0
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(DRAIN_SECONDS):
            while dropped <= DRAIN_BYTES:
                message = await receive()
                if message["type"] != "http.request" or not message.get("more_body", False):
                    return
                dropped += len(message.get("body", b""))


async def read_body_or_refuse(scope: Scope, receive: Receive, send: Send) -> bytes | None:
    """:func:`read_body`, answering the refusal itself: ``None`` means the request is over."""
    try:
        return await read_body(scope, receive)
    except BodyRefused as refused:
        expects_continue = any(name.lower() == b"expect" for name, _ in scope.get("headers", []))
        if refused.status == 413 and not expects_continue:  # (such a client waits, and sends nothing)
            await _drain(receive)
        # The connection closes after the answer: whatever is left of the body is never read as a request.
        await send_error(send, refused.status, refused.message, refused.code, [(b"connection", b"close")])
    except ClientGone:
        pass
    return None


async def refuse_duplicate_keys(body: bytes, send: Send) -> bool:
    """For a door that hands its JSON body to a parser of its own (the MCP SDK's, where the last of two equal
    keys wins): a 400 in the envelope naming a key given twice in one object, as the REST parser answers.
    True: refused, the request is over."""
    problem = duplicate_key_problem(body)
    if problem is None:
        return False
    await send_error(send, 400, f"JSON parse error - {problem}.", "bad_request")
    return True


async def refuse_bad_target(scope: Scope, send: Send) -> bool:
    """A 414 in the envelope for a path and query string over ``MAX_REQUEST_TARGET`` bytes as sent, and a 400
    for a path that is not UTF-8 once percent-decoded (an ASGI server decodes it leniently: ``%FF`` and
    ``%FE`` would both arrive as ``\ufffd``). Checked on ``raw_path``, before a body is read. True: refused,
    the request is over."""
    raw = scope.get("raw_path") or quote(scope["path"]).encode()
    query = scope.get("query_string", b"")
    too_long = target_too_long(len(raw) + (len(query) + 1 if query else 0))
    if too_long:
        await send_error(send, 414, too_long, "uri_too_long", [(b"connection", b"close")])
        return True
    undecodable = path_bytes_problem(unquote_to_bytes(raw))
    if undecodable:
        await send_error(send, 400, undecodable, "bad_request", [(b"connection", b"close")])
        return True
    return False
