"""The ASGI entry point, what ``manage.py serve`` runs (uvicorn): Django for every path, and the MCP server's
streamable HTTP app under ``/mcp``, natively on the same event loop.

In front of both, every request body is read here as it arrives, within the REST API's size limit and in
bounded time (:mod:`memoryplatform.asgi_http`), so a slow or endless client holds a coroutine, never a thread,
and a chunked body is limited like any other.

Django then runs as the WSGI app it is, on a fixed pool of ``SERVE_THREADS`` threads per process
(:class:`memoryplatform.asgi_wsgi.WsgiOnThreads`), and only once the whole body is in, which it is handed as
it is: a buffered answer crosses from its thread to the event loop once. Measured against Django's own ASGI
handler (``bench/RESULTS.md``, session 7): that handler runs each request's sync code on a new thread with
several hops between threads, and a connection kept per thread (``CONN_MAX_AGE``) then lives for one request;
here the threads, and so their PostgreSQL connections, persist. Measured again in issue 48, beside Django's
handler with Django's connection pool and gunicorn (``bench/RESULTS.md``): the bridge stays, gunicorn goes.

The MCP app is loaded on a thread after start-up (its SDK is about a third of a worker's imports), so the
worker answers REST requests before it; an ``/mcp`` request that comes first waits for the load.
"""

import asyncio
import gc
import importlib
import io
import os
from typing import TYPE_CHECKING, cast

from django.core.exceptions import DisallowedHost
from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

django_application = get_wsgi_application()

from django.core.handlers.asgi import ASGIRequest  # noqa: E402 (once Django is set up)

from memoryplatform import asgi_http, requestid  # noqa: E402
from memoryplatform.asgi_http import Receive, Scope, Send  # noqa: E402
from memoryplatform.asgi_wsgi import WsgiApp, WsgiOnThreads  # noqa: E402

if TYPE_CHECKING:
    from agenttools.mcp_server import McpHttpApp


def load_mcp_app() -> "McpHttpApp":
    """The MCP app, its SDK imported now."""
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
    """Route ``/mcp`` and ``/mcp/...`` to the MCP app, everything else to Django, each body read first."""

    def __init__(self, django_app: WsgiOnThreads) -> None:
        self.django_app = django_app
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
        if body is not None:
            await self.django_app(asgi_http.with_length(scope, len(body)), body, send)

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
"""Threads per process running Django's views (``manage.py serve --threads``)."""

application = Application(WsgiOnThreads(cast(WsgiApp, django_application), threads=THREADS))

gc.freeze()
"""Everything alive once the app is built (Django, its apps, the routes) leaves the collector's generations:
a full collection then walks only what requests made. Measured in session 15 (``bench/RESULTS.md``): full
collections cost a recall 0.07 ms on average before the freeze, nothing after."""
