"""The WSGI entry point, for those who run a WSGI server: Django for every path, and the MCP server's
streamable HTTP app under ``/mcp``. ``manage.py serve`` runs ``config.asgi`` instead: under WSGI each
request holds a thread while its body arrives, so slow clients can take every thread.

The MCP app is ASGI; :class:`a2wsgi.ASGIMiddleware` runs it on an event loop in a thread of its own. That
thread is started on the first ``/mcp`` request, inside the worker, so it survives ``gunicorn --preload``
(threads do not survive a fork).
"""

import io
import json
import os
import threading
from collections.abc import Callable, Iterable
from typing import Any

from django.core.exceptions import DisallowedHost
from django.core.handlers.wsgi import WSGIRequest
from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

django_application = get_wsgi_application()

from memoryplatform.api.errors import envelope  # noqa: E402 (once Django is set up)
from memoryplatform.asgi_http import body_limit  # noqa: E402

PATH_INFO = "PATH_INFO"  # WSGI request variables, not settings
CONTENT_LENGTH = "CONTENT_LENGTH"
TRANSFER_ENCODING = "HTTP_TRANSFER_ENCODING"


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

                    from agenttools.mcp_server import McpHttpApp

                    self._mcp_app = ASGIMiddleware(McpHttpApp())  # type: ignore[arg-type]  # an ASGI app on plain-dict scopes
        return self._mcp_app

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        mcp = _is_mcp_path(environ.get(PATH_INFO) or "")
        if mcp and not _host_allowed(environ):
            return _error(
                start_response, "400 Bad Request", "Invalid Host header for this server.", "bad_request"
            )
        if not _buffer_chunked_body(environ):
            return _error(
                start_response,
                "413 Request Entity Too Large",
                "Request body is too large.",
                "payload_too_large",
            )
        return self.mcp_app()(environ, start_response) if mcp else self.django_app(environ, start_response)


def _host_allowed(environ: dict[str, Any]) -> bool:
    """``/mcp`` does not pass through Django, so it checks the Host header against ``ALLOWED_HOSTS`` here,
    with Django's own check: a page on another host cannot reach it by DNS rebinding."""
    try:
        WSGIRequest(environ).get_host()  # reads headers only; the body stays unread for the MCP app
    except DisallowedHost:
        return False
    return True


def _buffer_chunked_body(environ: dict[str, Any]) -> bool:
    """a2wsgi and Django read ``CONTENT_LENGTH`` bytes of the body, so a chunked body (no length) would reach
    the MCP app and the REST API empty: read it here, within the REST API's limit, and give its length. False:
    over the limit (the rest of the body is never read)."""
    if environ.get(CONTENT_LENGTH) or "chunked" not in environ.get(TRANSFER_ENCODING, "").lower():
        return True
    limit = body_limit()
    body = environ["wsgi.input"].read() if limit is None else environ["wsgi.input"].read(limit + 1)
    if limit is not None and len(body) > limit:
        return False
    environ["wsgi.input"] = io.BytesIO(body)
    environ[CONTENT_LENGTH] = str(len(body))
    return True


def _error(start_response: Callable[..., Any], status: str, message: str, code: str) -> list[bytes]:
    body = json.dumps(envelope(message, code)).encode()
    start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]


application = McpDispatcher(django_application)
