"""The WSGI entry point: Django for every path, and the MCP server's streamable HTTP app under ``/mcp``.

The MCP app is ASGI; :class:`a2wsgi.ASGIMiddleware` runs it on an event loop in a thread of its own. That
thread is started on the first ``/mcp`` request, inside the worker, so it survives ``gunicorn --preload``
(threads do not survive a fork).
"""

import json
import os
import threading
from collections.abc import Callable, Iterable
from typing import Any

from django.core.exceptions import DisallowedHost
from django.core.handlers.wsgi import WSGIRequest
from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryplatform.settings")

django_application = get_wsgi_application()

from memoryplatform.api.errors import envelope  # noqa: E402 (once Django is set up)

PATH_INFO = "PATH_INFO"  # a WSGI request variable, not a setting


def _is_mcp_path(path: str) -> bool:
    return path == "/mcp" or path.startswith("/mcp/")


class McpDispatcher:
    """Send ``/mcp`` and ``/mcp/...`` to the MCP app, everything else to Django."""

    def __init__(self, django_app: Callable[..., Iterable[bytes]]) -> None:
        self.django_app = django_app
        self._mcp_app: Callable[..., Iterable[bytes]] | None = None
        self._lock = threading.Lock()

    def mcp_app(self) -> Callable[..., Iterable[bytes]]:
        if self._mcp_app is None:
            with self._lock:
                if self._mcp_app is None:
                    from a2wsgi import ASGIMiddleware

                    from usermemory.mcp_server import McpHttpApp

                    self._mcp_app = ASGIMiddleware(McpHttpApp())  # type: ignore[arg-type]
        return self._mcp_app

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if _is_mcp_path(environ.get(PATH_INFO) or ""):
            if not _host_allowed(environ):
                return _bad_host(start_response)
            return self.mcp_app()(environ, start_response)
        return self.django_app(environ, start_response)


def _host_allowed(environ: dict[str, Any]) -> bool:
    """``/mcp`` does not pass through Django, so it checks the Host header against ``ALLOWED_HOSTS`` here,
    with Django's own check: a page on another host cannot reach it by DNS rebinding."""
    try:
        WSGIRequest(environ).get_host()  # reads headers only; the body stays unread for the MCP app
    except DisallowedHost:
        return False
    return True


def _bad_host(start_response: Callable[..., Any]) -> list[bytes]:
    body = json.dumps(envelope("Invalid Host header for this server.", "bad_request")).encode()
    start_response(
        "400 Bad Request", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
    )
    return [body]


application = McpDispatcher(django_application)
