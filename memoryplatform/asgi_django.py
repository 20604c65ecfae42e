"""Django's own ASGI handler (``get_asgi_application()``) behind the same front as ``memoryplatform.asgi``:
the MCP app under ``/mcp``, and every request body read first within the REST API's limits. Run with Django's
connection pool (``DATABASE_POOL_MAX``) for ``bench/serving.py``, beside the thread bridge."""

import asyncio
import contextlib
import gc
import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryplatform.settings")

django_application = get_asgi_application()

from agenttools.mcp_server import McpHttpApp  # noqa: E402 (once Django is set up)
from memoryplatform import asgi_http, requestid  # noqa: E402
from memoryplatform.asgi import _host_allowed, _is_mcp_path  # noqa: E402
from memoryplatform.asgi_http import Receive, Scope, Send  # noqa: E402

LIMIT = int(os.environ.get("SERVE_LIMIT") or 0)
"""At most this many requests per process in Django at once (0: no limit); the others wait as coroutines."""


class Application:
    def __init__(self) -> None:
        self.mcp_app = McpHttpApp()
        self.slots = asyncio.Semaphore(LIMIT) if LIMIT else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await self.mcp_app.aclose()
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        scope, send, request_id = requestid.asgi_request_id(scope, send)
        token = requestid.current.set(request_id)
        try:
            if await asgi_http.refuse_bad_target(scope, send):
                return
            if _is_mcp_path(scope["path"]):
                if not _host_allowed(scope):
                    await asgi_http.send_error(
                        send, 400, "Invalid Host header for this server.", "bad_request"
                    )
                    return
                await self.mcp_app(scope, receive, send)
                return
            body = await asgi_http.read_body_or_refuse(scope, receive, send)
            if body is not None:
                scope = asgi_http.with_length(scope, len(body))
                async with self.slots or contextlib.nullcontext():
                    await django_application(scope, asgi_http.replay(body, receive), send)
        finally:
            requestid.current.reset(token)


application = Application()
gc.freeze()
