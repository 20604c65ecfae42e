"""The WSGI entry point: Django for every path, and the MCP server's streamable HTTP app under ``/mcp``.

The MCP app is ASGI; :class:`a2wsgi.ASGIMiddleware` runs it on an event loop in a thread of its own. That
thread is started on the first ``/mcp`` request, inside the worker, so it survives ``gunicorn --preload``
(threads do not survive a fork).
"""

import os
import threading
from collections.abc import Callable, Iterable
from typing import Any

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryplatform.settings")

django_application = get_wsgi_application()


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
            return self.mcp_app()(environ, start_response)
        return self.django_app(environ, start_response)


application = McpDispatcher(django_application)
