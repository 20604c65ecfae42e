"""Every request's id: the ``X-Request-Id`` a proxy or client sent, when it is a plain token, else a new one.

Every response carries it back, and every log line written while the request runs names it (``[<id>]``,
by :class:`RequestIdFilter`; ``[-]`` outside a request). Set in two places, so that every door has it:
:func:`asgi_request_id` in front of the ASGI app (``/mcp`` and the answers given before Django, such as a
413), and :class:`RequestIdMiddleware` in Django (which takes the id the ASGI layer chose, and serves alone
under a WSGI server).
"""

import logging
import re
import uuid
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Any

from django.http import HttpRequest, HttpResponse

HEADER = "X-Request-Id"
_HEADER_KEY = HEADER.lower().encode("latin-1")
_TOKEN = re.compile(r"[A-Za-z0-9._:-]{1,128}")

current: ContextVar[str] = ContextVar("request_id", default="-")


def request_id_from(sent: str | None) -> str:
    """The id sent, if it is a plain token (letters, digits, ``.``, ``_``, ``:``, ``-``; at most 128), else a
    new one: anything else could forge or split a log line."""
    return sent if sent and _TOKEN.fullmatch(sent) else uuid.uuid4().hex


class RequestIdFilter(logging.Filter):
    """Gives every log record ``request_id``: the request's it was written in, or ``-``."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not getattr(record, "request_id", None):
            record.request_id = current.get()
        return True


class RequestIdMiddleware:
    """Django's side: ``request.request_id``, the context the log filter reads, and the response header."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        request_id = request_id_from(request.headers.get(HEADER))
        request.request_id = request_id  # type: ignore[attr-defined]  # read by the error handler and the log
        token = current.set(request_id)
        try:
            response = self.get_response(request)
        finally:
            current.reset(token)
        response.headers.setdefault(HEADER, request_id)
        return response


Scope = dict[str, Any]
Send = Callable[[dict[str, Any]], Awaitable[None]]


def asgi_request_id(scope: Scope, send: Send) -> tuple[Scope, Send, str]:
    """The ASGI side: the request's id, put in the scope's ``X-Request-Id`` (so Django takes the same one),
    and a ``send`` that adds it to a response that does not carry it yet. The caller sets :data:`current`."""
    headers = [(name, value) for name, value in scope.get("headers", []) if name.lower() != _HEADER_KEY]
    sent = [value for name, value in scope.get("headers", []) if name.lower() == _HEADER_KEY]
    request_id = request_id_from(sent[0].decode("latin-1") if len(sent) == 1 else None)
    scope = {**scope, "headers": [*headers, (_HEADER_KEY, request_id.encode("latin-1"))]}

    async def send_with_id(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            response_headers = list(message.get("headers", []))
            if not any(name.lower() == _HEADER_KEY for name, _ in response_headers):
                response_headers.append((_HEADER_KEY, request_id.encode("latin-1")))
                message = {**message, "headers": response_headers}
        await send(message)

    return scope, send_with_id, request_id
