"""What the application's log may say: no user id and no query text, so the log outlives no GDPR erasure.

A user id travels in paths (``/usermemorystore/memories/{userId}/...``), in arguments and in exception
messages (a database error's ``DETAIL: Key (user_id, key)=(...)``, a JSON Schema error quoting the
instance, a provider's answer echoing its input). So:

- a request is logged by its route (``/usermemorystore/memories/<text:user_id>/search``), never its path
  (:func:`route_of`; the request log, and Django's own ``django.request`` lines through
  :class:`RequestRouteFilter`);
- an exception is logged by its type and its frames (file, line, function, source line), never its message
  (:func:`safe_traceback`, :func:`exception_summary`). A database error adds its SQLSTATE and, outside the
  data exceptions (class 22, whose messages quote the value), PostgreSQL's primary message, which names
  constraints and columns, not values;
- a user, where a line must tell users apart, by :func:`user_ref`: a keyed hash an operator can compute for
  a given user id (``manage.py shell``) but not reverse.

The request id (``[<id>]`` on every line) ties a line to the answer the client got.
"""

import hashlib
import hmac
import logging
import traceback
from typing import Any

import psycopg
from django.http import HttpRequest

from memoryplatform import publicids

UNROUTED = "(no route)"
_MAX_CHAIN = 5  # causes and contexts followed from an exception


def route_of(request: HttpRequest) -> str:
    """The route a request matched, as written in the URLconf (``/`` first), else :data:`UNROUTED`. A view
    may name its own (``log_route``): an API route, :func:`memoryplatform.routing.api_path`'s template; the
    catch-all of unknown paths, :data:`UNROUTED`. Any other, Django's ``route``."""
    match = getattr(request, "resolver_match", None)
    if match is None:
        return UNROUTED
    template = getattr(match.func, "log_route", None) or match.route
    return template if template == UNROUTED else "/" + template.lstrip("^").removesuffix("$")


def user_ref(user_id: str) -> str:
    """``user:<12 hex digits>``: a keyed hash of ``user_id`` (the public ids' key), the same for the same
    user, that names no user."""
    key = hmac.new(publicids.master_key(), b"memoryplatform.logsafe.user", hashlib.sha256).digest()
    digest = hmac.new(key, user_id.encode("utf-8", "backslashreplace"), hashlib.sha256).hexdigest()
    return f"user:{digest[:12]}"


def _one(exc: BaseException) -> str:
    name = type(exc).__qualname__
    database = exc if isinstance(exc, psycopg.Error) else exc.__cause__
    if isinstance(database, psycopg.Error) and database.sqlstate:
        state = database.sqlstate
        primary = database.diag.message_primary
        if primary and not state.startswith("22"):
            return f"{name} [{state}] {primary}"
        return f"{name} [{state}]"
    return name


def _chain(exc: BaseException) -> list[BaseException]:
    chain, seen = [exc], {id(exc)}
    while len(chain) < _MAX_CHAIN:
        cause = chain[-1].__cause__ or chain[-1].__context__
        if cause is None or id(cause) in seen:
            break
        chain.append(cause)
        seen.add(id(cause))
    return chain


def exception_summary(exc: BaseException) -> str:
    """The exception and its causes by type (and a database error's SQLSTATE and primary message), without
    their messages: ``OperationalError [55P03] canceling statement due to lock timeout <- LockNotAvailable
    [55P03] ...``."""
    return " <- ".join(_one(link) for link in _chain(exc))


def safe_traceback(exc: BaseException) -> str:
    """:func:`exception_summary` and the frames of each exception of the chain, innermost cause first as
    Python prints them; no message, no local value."""
    parts = []
    for link in reversed(_chain(exc)):
        frames = "".join(traceback.format_tb(link.__traceback__)) if link.__traceback__ else ""
        parts.append(f"Traceback (most recent call last):\n{frames}{_one(link)}")
    return "\n".join(parts)


class SafeExceptionFilter(logging.Filter):
    """On a library's logger that logs exceptions we raised: a record's exception
    becomes its :func:`safe_traceback` for every handler (a logger's filter runs before any), and an ``exc``
    argument (a ``%(exc)s``, the exception's repr) its :func:`exception_summary`."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            if isinstance(record.args, dict) and "exc" in record.args:
                record.args = {**record.args, "exc": exception_summary(exc)}
            record.exc_text = safe_traceback(exc)
            record.exc_info = None
        return True


class RequestRouteFilter(SafeExceptionFilter):
    """On Django's ``django.request`` logger, whose lines name the request's path (``Internal Server Error:
    /usermemorystore/memories/<user>``) and carry the exception: the path becomes the route, and the
    exception its :func:`safe_traceback`."""

    def filter(self, record: logging.LogRecord) -> bool:
        request: Any = getattr(record, "request", None)
        if request is not None and isinstance(record.args, tuple):
            paths = {request.path, request.get_full_path()}
            route = route_of(request)
            record.args = tuple(route if arg in paths else arg for arg in record.args)
        return super().filter(record)
