"""Django, a WSGI app, under the ASGI front (``config/asgi.py``): each request runs on a fixed pool of
threads, handed the body the front has already read, and crosses between the event loop and its thread as
few times as its response allows.

- **A buffered response** (Django's ``HttpResponse``, every API answer): the thread runs the view, joins the
  body and closes the response (Django's ``request_finished``, which returns the thread's database
  connection), and hands the loop the start and body messages in one crossing. The loop sends them.
- **A streamed response** (``StreamingHttpResponse``, ``FileResponse``, such as WhiteNoise's static files; or
  any WSGI iterable that is not Django's buffered response): the thread iterates it, as it must, since a
  stream may read the database on the thread's connection. Each piece goes to the loop while the thread makes
  the next; pieces made meanwhile are sent together, up to :data:`STREAM_COALESCE` bytes, so a stream of
  small pieces does not cross once a piece.

What this replaces, :class:`a2wsgi.WSGIMiddleware`, crosses for every read of the body, for ``start_response``
and for each message sent, each a wait on the event loop's thread; on 2 cores, under load, that cost a write
42-46 % of its throughput against gunicorn (``bench/RESULTS.md``, session 15).

The environ follows PEP 3333 as the ASGI spec maps it, and also carries ``RAW_URI`` (the path and query as
sent, as gunicorn gives it), so a route can tell an encoded ``/`` in a path value from a separator.
"""

import asyncio
import contextvars
import io
import logging
import sys
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from types import TracebackType
from typing import Any
from urllib.parse import quote

from memoryplatform import requestid
from memoryplatform.asgi_http import Message, Scope, Send, send_error
from memoryplatform.logsafe import safe_traceback

logger = logging.getLogger(__name__)

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]
ExcInfo = tuple[type[BaseException], BaseException, TracebackType | None]

STREAM_COALESCE = 64 * 1024
"""Most bytes of a stream's pieces sent together, when the thread made them while the last were sent."""

_HEADER_NAMES = {b"content-type": "CONTENT_TYPE", b"content-length": "CONTENT_LENGTH"}


def environ_of(scope: Scope, body: bytes) -> dict[str, Any]:
    """The WSGI environ of an ASGI HTTP request whose body has been read: strings as PEP 3333 has them (bytes
    decoded as Latin-1; the path UTF-8 encoded first, as the ASGI spec maps it), repeated headers joined with
    ``,``, ``wsgi.input`` over the body. A header whose name holds ``_`` is dropped: it would land on the same
    ``HTTP_*`` key as the one spelled with ``-`` that a proxy sets (``X-Forwarded-Proto``, trusted with
    ``BEHIND_TLS_PROXY``) and strips only in that spelling."""
    script_name = scope.get("root_path", "").encode().decode("latin-1")
    path_info = scope["path"].encode().decode("latin-1")
    if script_name and path_info.startswith(script_name):
        path_info = path_info[len(script_name) :]
    query = scope.get("query_string", b"").decode("latin-1")
    raw_path = (scope.get("raw_path") or quote(scope["path"]).encode()).decode("latin-1")
    server_name, server_port = scope.get("server") or ("localhost", 80)
    environ: dict[str, Any] = {
        "REQUEST_METHOD": scope["method"],
        "SCRIPT_NAME": script_name,
        "PATH_INFO": path_info,
        "QUERY_STRING": query,
        "RAW_URI": f"{raw_path}?{query}" if query else raw_path,
        "SERVER_NAME": server_name,
        "SERVER_PORT": str(server_port or 0),
        "SERVER_PROTOCOL": f"HTTP/{scope.get('http_version', '1.1')}",
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": scope.get("scheme", "http"),
        "wsgi.input": io.BytesIO(body),
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": True,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
    }
    client = scope.get("client")
    if client:
        environ["REMOTE_ADDR"], environ["REMOTE_PORT"] = client[0], str(client[1])
    for raw_name, raw_value in scope.get("headers", []):
        name = raw_name.lower()
        if b"_" in name:  # "X_Forwarded_Proto" would pass for "X-Forwarded-Proto": dropped, as gunicorn does
            continue
        key = _HEADER_NAMES.get(name) or "HTTP_" + name.decode("latin-1").upper().replace("-", "_")
        value = raw_value.decode("latin-1")
        environ[key] = f"{environ[key]},{value}" if key in environ else value
    return environ


def _is_buffered(iterable: Iterable[bytes]) -> bool:
    """Django's ``HttpResponse`` (``streaming`` is part of its documented API), or a list of pieces."""
    return isinstance(iterable, list | tuple) or getattr(iterable, "streaming", None) is False


class _Exchange:
    """One request's run on its thread: the WSGI call, its ``start_response``, and what goes to the loop."""

    def __init__(self, app: WsgiApp, loop: asyncio.AbstractEventLoop, send: Send) -> None:
        self.app, self.loop, self.send = app, loop, send
        self.status: int | None = None
        self.headers: list[tuple[bytes, bytes]] = []
        self.written: list[bytes] = []  # what a legacy app gave write() before returning its iterable
        self.started = False  # the response's start has gone to the client: an error can no longer answer

    def start_response(
        self, status: str, headers: list[tuple[str, str]], exc_info: ExcInfo | None = None
    ) -> Callable[[bytes], None]:
        if exc_info is not None:
            if self.started:
                raise exc_info[1].with_traceback(exc_info[2])
        elif self.status is not None:
            raise RuntimeError("start_response was called twice without exc_info.")
        self.status = int(status.split(" ", 1)[0])
        self.headers = [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in headers]
        return self.written.append

    def _start(self) -> Message:
        if self.status is None:
            raise RuntimeError("The WSGI app returned without calling start_response.")
        return {"type": "http.response.start", "status": self.status, "headers": self.headers}

    def run(self, environ: dict[str, Any]) -> list[Message]:
        """On the request's thread. A buffered response comes back as its messages, for the loop to send; a
        streamed one is sent from here, and nothing comes back."""
        iterable = self.app(environ, self.start_response)
        try:
            if _is_buffered(iterable):
                body = b"".join([*self.written, *iterable])
                return [self._start(), {"type": "http.response.body", "body": body}]
            self._stream(iterable)
            return []
        finally:
            close = getattr(iterable, "close", None)
            if close is not None:
                close()

    async def _deliver(self, message: Message) -> None:
        await self.send(message)

    def _submit(self, message: Message) -> "Future[None]":
        return asyncio.run_coroutine_threadsafe(self._deliver(message), self.loop)

    def _stream(self, iterable: Iterable[bytes]) -> None:
        pieces = list(self.written)
        size = sum(map(len, pieces))
        in_flight: Future[None] | None = None
        for piece in iterable:  # (the first piece may call start_response: Django's does not, others may)
            if not self.started:
                self.started = True
                self._submit(self._start()).result()
            if piece:
                pieces.append(piece)
                size += len(piece)
            if pieces and (in_flight is None or in_flight.done() or size >= STREAM_COALESCE):
                if in_flight is not None:
                    in_flight.result()
                in_flight = self._submit(
                    {"type": "http.response.body", "body": b"".join(pieces), "more_body": True}
                )
                pieces, size = [], 0
        if in_flight is not None:
            in_flight.result()
        if not self.started:
            self.started = True
            self._submit(self._start()).result()
        self._submit({"type": "http.response.body", "body": b"".join(pieces)}).result()


class WsgiOnThreads:
    """An ASGI app, called with the body already read, that runs a WSGI app on ``threads`` threads. The
    threads persist, and so do their database connections (``CONN_MAX_AGE``)."""

    def __init__(self, app: WsgiApp, *, threads: int) -> None:
        self.app = app
        self.executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="django")

    async def __call__(self, scope: Scope, body: bytes, send: Send) -> None:
        loop = asyncio.get_running_loop()
        exchange = _Exchange(self.app, loop, send)
        context = contextvars.copy_context()  # the request id, for the thread's log lines
        try:
            messages = await loop.run_in_executor(
                self.executor, context.run, exchange.run, environ_of(scope, body)
            )
        except Exception as exc:
            if exchange.started:  # part of the answer is out: the server closes the connection
                raise
            logger.error("The WSGI app failed before it answered.\n%s", safe_traceback(exc))
            details = {"requestId": requestid.current.get()}
            await send_error(send, 500, "Internal server error.", "server_error", details=details)
            return
        for message in messages:
            await send(message)
