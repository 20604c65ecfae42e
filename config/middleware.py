"""Request log: one line per API request, naming its route (never its path, which holds user ids), the caller
(agent or role) and key prefix, never the key.

And the browser-only middleware: sessions, CSRF, the admin's sign-in and messages serve people in a browser. A
request that presents an API key is authenticated by that key alone (DRF tries the key first and never falls
back to a session when a key is offered), so outside the admin it skips them: they would build a session, a
message store and a CSRF check for nothing (about 0.1 ms of CPU per API call, ``bench/RESULTS.md``).
"""

import logging
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote_to_bytes

from django.contrib.auth.middleware import AuthenticationMiddleware as DjangoAuthenticationMiddleware
from django.contrib.messages.middleware import MessageMiddleware as DjangoMessageMiddleware
from django.contrib.sessions.middleware import SessionMiddleware as DjangoSessionMiddleware
from django.http import HttpRequest, HttpResponse, HttpResponseForbidden, JsonResponse
from django.middleware.csrf import CsrfViewMiddleware as DjangoCsrfViewMiddleware

from apikeys.authentication import presented_key
from memoryplatform import providercalls
from memoryplatform.api.errors import envelope
from memoryplatform.logsafe import route_of
from memoryplatform.routing import sent_path
from memoryplatform.text import path_bytes_problem, target_too_long, text_problem

logger = logging.getLogger("memoryplatform.requests")

GetResponse = Callable[[HttpRequest], HttpResponse]


class RequestLogMiddleware:
    def __init__(self, get_response: GetResponse) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        started = time.perf_counter()
        with providercalls.calling_as(None):  # the key's authentication names the caller (apikeys)
            response = self.get_response(request)
        if request.path.startswith("/static/"):
            return response
        caller = getattr(request, "user", None)
        describe = getattr(caller, "log_label", None)
        if callable(describe):
            who = describe()
        elif caller is not None and getattr(caller, "is_authenticated", False):
            who = f"staff={caller.get_username()}"
        else:
            who = "anonymous"
        logger.info(
            "%s %s %s %.1fms caller=%s",
            request.method,
            route_of(request),  # never the path: it holds user ids (memoryplatform.logsafe)
            response.status_code,
            (time.perf_counter() - started) * 1000,
            who,
        )
        return response


class RefuseUnstorableTextMiddleware:
    """Before any view reads them: a 414 in the envelope for a path and query string over
    ``MAX_REQUEST_TARGET`` bytes, and a 400 for a path that is not UTF-8 once percent-decoded, or a path or
    query string that holds a NUL.

    A user id, key, category or search term with a NUL would reach the database, which refuses it (a 500).
    Lone surrogates cannot arrive here: Django re-escapes undecodable bytes of a path (so they are refused
    here, from the raw path or Django's escapes: :func:`~memoryplatform.routing.sent_path`) and replaces them
    in a query string. ``config.asgi`` makes the first two checks itself, on the raw path, before a
    body is read: uvicorn passes Django the path decoded, with U+FFFD for undecodable bytes.
    """

    def __init__(self, get_response: GetResponse) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        path, target_length = _sent_path(request)
        too_long = target_too_long(target_length)
        if too_long:
            return JsonResponse(envelope(too_long, "uri_too_long"), status=414)
        undecodable = path_bytes_problem(path)
        if undecodable:
            return JsonResponse(envelope(undecodable, "bad_request"), status=400)
        for where, text in [("path", request.path), *(("query", value) for value in _query_texts(request))]:
            problem = text_problem(text)
            if problem:
                return JsonResponse(envelope(f"The {where} {problem}.", "bad_request"), status=400)
        return self.get_response(request)


def _query_texts(request: HttpRequest) -> list[str]:
    return [text for name, values in request.GET.lists() for text in (name, *values)]


def _sent_path(request: HttpRequest) -> tuple[bytes, int]:
    """The path's bytes as the client sent them (percent-decoded), and the length of the request target (path
    and query string, percent-encoded)."""
    path = sent_path(request)
    query = request.META.get("QUERY_STRING", "")
    return unquote_to_bytes(path), len(path) + (len(query) + 1 if query else 0)


ADMIN_PREFIX = "/admin/"  # config.urls mounts the admin here


def presents_api_key(request: HttpRequest) -> bool:
    """An API call: a key in ``Authorization`` (``Bearer``, ``Token``) or ``X-API-Key``, outside the admin."""
    return presented_key(request.headers) is not None and not request.path.startswith(ADMIN_PREFIX)


class BrowserOnlyMixin:
    """Before a Django middleware class: requests that present an API key go straight past it."""

    get_response: Callable[[HttpRequest], Any]

    def __call__(self, request: HttpRequest) -> Any:
        if presents_api_key(request):
            return self.get_response(request)
        return super().__call__(request)  # type: ignore[misc]  # the Django middleware class it is mixed into


class SessionMiddleware(BrowserOnlyMixin, DjangoSessionMiddleware):
    pass


class CsrfViewMiddleware(BrowserOnlyMixin, DjangoCsrfViewMiddleware):
    def process_view(
        self, request: HttpRequest, callback: Any, callback_args: Any, callback_kwargs: Any
    ) -> HttpResponseForbidden | None:
        if presents_api_key(request):  # process_request did not run: nothing to check against
            return None
        return super().process_view(request, callback, callback_args, callback_kwargs)


class AuthenticationMiddleware(BrowserOnlyMixin, DjangoAuthenticationMiddleware):
    pass


class MessageMiddleware(BrowserOnlyMixin, DjangoMessageMiddleware):
    pass
