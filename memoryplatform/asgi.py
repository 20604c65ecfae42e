"""The ASGI entry point, what ``manage.py serve`` runs (uvicorn): Django's own ASGI handler for every path,
and the MCP server's streamable HTTP app under ``/mcp``, natively on the same event loop.

In front of both, small ASGI wrappers (:mod:`memoryplatform.asgi_http`): a path too long or not UTF-8 is
refused first, and every request body is read as it arrives, within the REST API's size limit and in bounded
time, so a slow or endless client holds a coroutine, never a thread, and a chunked body is limited like any
other. Django is then handed the body already read.

Django runs each request's sync code on a thread of its own (asgiref's ``ThreadSensitiveContext``: one
request's middleware and view share that thread; requests do not share one). At most ``SERVE_THREADS``
requests per process are in Django at once; the others wait here, as coroutines, so the threads, and the
local model's OpenMP teams, stay bounded on a small machine. Each thread takes its connection from Django's
connection pool (``DATABASE_POOL_MAX``, which ``serve`` sets to the same number) and gives it back at the
request's end: connections and their prepared statements live as long as the process. Measured against our
former thread bridge and gunicorn in ``bench/RESULTS.md`` (issue 48).
"""

import asyncio
import gc
import importlib
import io
import os
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, cast

from django.core.asgi import get_asgi_application
from django.core.exceptions import DisallowedHost

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryplatform.settings")

django_application = get_asgi_application()

from django.core.handlers.asgi import ASGIRequest  # noqa: E402 (once Django is set up)

from memoryplatform import asgi_http, requestid  # noqa: E402
from memoryplatform.asgi_http import Receive, Scope, Send  # noqa: E402

if TYPE_CHECKING:
    from agenttools.mcp_server import McpHttpApp

ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def load_mcp_app() -> "McpHttpApp":
    """The MCP app, its SDK imported now: about a third of a worker's start-up (issue 48), which no REST
    request needs."""
    return importlib.import_module("agenttools.mcp_server").McpHttpApp()


def _is_mcp_path(path: str) -> bool:
    return path == "/mcp" or path.startswith("/mcp/")


def _host_allowed(scope: Scope) -> bool:
    """``/mcp`` does not pass through Django, so it checks the Host header against ``ALLOWED_HOSTS`` here,
    with Django's own check: a page on another host cannot reach it by DNS rebinding."""
    try:
        ASGIRequest(scope, io.BytesIO()).get_host()  # headers only
    except DisallowedHost:
        return False
    return True


class Application:
    """Route ``/mcp`` and ``/mcp/...`` to the MCP app, everything else to Django (its body read first, at most
    ``threads`` requests in it at once).

    The MCP app is loaded after start-up, on a thread, so the worker answers REST requests before: the
    lifespan's startup begins the load, and an ``/mcp`` request that comes first waits for it."""

    def __init__(self, django_app: ASGIApp, *, threads: int) -> None:
        self.django_app = django_app
        self.slots = asyncio.Semaphore(threads)
        self._mcp: McpHttpApp | None = None
        self._mcp_loading: asyncio.Future[McpHttpApp] | None = None

    def _load_mcp(self) -> "asyncio.Future[McpHttpApp]":
        if self._mcp_loading is None:
            self._mcp_loading = asyncio.ensure_future(asyncio.to_thread(load_mcp_app))
        return self._mcp_loading

    async def mcp_app(self) -> "McpHttpApp":
        if self._mcp is None:
            self._mcp = await asyncio.shield(self._load_mcp())
        return self._mcp

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":  # no websockets here
            return
        scope, send, request_id = requestid.asgi_request_id(scope, send)
        token = requestid.current.set(request_id)
        try:
            await self._http(scope, receive, send)
        finally:
            requestid.current.reset(token)

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        if await asgi_http.refuse_bad_target(scope, send):
            return
        if _is_mcp_path(scope["path"]):
            if not _host_allowed(scope):
                await asgi_http.send_error(send, 400, "Invalid Host header for this server.", "bad_request")
                return
            await (await self.mcp_app())(scope, receive, send)
            return
        body = await asgi_http.read_body_or_refuse(scope, receive, send)
        if body is None:
            return
        async with self.slots:
            await self.django_app(
                asgi_http.with_length(scope, len(body)), asgi_http.replay(body, receive), send
            )

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                self._load_mcp()  # in the background: the worker answers meanwhile
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if self._mcp_loading is not None:
                    await (await self.mcp_app()).aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return


THREADS = int(os.environ.get("SERVE_THREADS") or 4)
"""Requests per process in Django at once (``manage.py serve --threads``)."""

application = Application(cast(ASGIApp, django_application), threads=THREADS)

gc.freeze()
"""Everything alive once the app is built (Django, its apps, the routes) leaves the collector's generations:
a full collection then walks only what requests made. Measured in session 15 (``bench/RESULTS.md``): full
collections cost a recall 0.07 ms on average before the freeze, nothing after."""
