"""One error envelope for every API answer that is not a success.

``{"error": "<human message>", "code": "<machine code>", "details": {...}}``

Services raise :class:`memoryplatform.errors.ServiceError` subclasses; DRF's own exceptions (parse errors,
auth, throttling, 405) and Django's 404/500 handlers are translated to the same shape here.
"""

import logging
from typing import Any

import psycopg
from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import InterfaceError, OperationalError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from rest_framework import exceptions, status
from rest_framework.response import Response

from memoryplatform.errors import ServiceError
from memoryplatform.logsafe import safe_traceback
from memoryplatform.requestid import request_id_from

logger = logging.getLogger("memoryplatform.api")


_CODES_BY_STATUS = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    409: "conflict",
    413: "payload_too_large",
    414: "uri_too_long",
    415: "unsupported_media_type",
    429: "rate_limited",
    500: "server_error",
    503: "unavailable",
}


def envelope(message: str, code: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"error": message, "code": code, "details": details or {}}


def first_message(detail: Any) -> str:
    """The first human message in a DRF error detail (a string, list or nested dict)."""
    if isinstance(detail, dict):
        for field, value in detail.items():
            message = first_message(value)
            return message if field == "non_field_errors" else f"{field}: {message}"
        return "Invalid input."
    if isinstance(detail, list):
        return first_message(detail[0]) if detail else "Invalid input."
    return str(detail)


def invalid_input(detail: Any, code: str = "bad_request") -> dict[str, Any]:
    """The envelope of refused input (DRF's ``ValidationError``, an unknown query parameter): the first
    message as ``error``, all of them in ``details.fields`` (by name) or ``details.errors`` (a list)."""
    details = {"fields": detail} if isinstance(detail, dict) else {"errors": detail}
    return envelope(first_message(detail), code, details)


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response:
    headers: dict[str, str] = {}
    if isinstance(exc, ServiceError):
        if exc.retry_after is not None:
            headers["Retry-After"] = str(exc.retry_after)
        return Response(envelope(exc.message, exc.code, exc.details), status=exc.status_code, headers=headers)
    if isinstance(exc, RequestDataTooBig):
        return Response(
            envelope("Request body is too large.", "payload_too_large"),
            status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
        )
    if database_unreachable(exc):
        # The database went away mid-request (a restart, a crash, a lost connection) or takes no more
        # connections: nothing was half-written (the transaction is gone with it); the next request
        # reconnects.
        logger.warning("Database unavailable in %s: %s", context.get("view").__class__.__name__, exc)
        return Response(
            envelope("The database is unavailable; retry the request.", "unavailable"),
            status=status.HTTP_503_SERVICE_UNAVAILABLE,
            headers={"Retry-After": "1"},
        )
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied()
    elif isinstance(exc, DjangoValidationError):
        exc = exceptions.ValidationError(exc.message_dict if hasattr(exc, "error_dict") else exc.messages)

    if not isinstance(exc, exceptions.APIException):
        return _server_error(exc, context)

    auth_header = getattr(exc, "auth_header", None)
    if auth_header:
        headers["WWW-Authenticate"] = auth_header
    wait = getattr(exc, "wait", None)
    if wait:
        headers["Retry-After"] = str(int(wait))

    code = _CODES_BY_STATUS.get(exc.status_code, "bad_request")
    if isinstance(exc, exceptions.ValidationError):
        return Response(invalid_input(exc.detail, code), status=exc.status_code)
    return Response(envelope(first_message(exc.detail), code), status=exc.status_code, headers=headers)


# SQLSTATEs of a server that cannot serve the connection, whatever the statement: admin_shutdown,
# crash_shutdown, cannot_connect_now (starting up or shutting down), idle_session_timeout,
# too_many_connections. Class 08 (connection_exception) is one too. Every other error the server raises (a
# data error, a program limit such as a tsvector over 1 MB, a lock or statement timeout, a deadlock) is the
# request's, not an outage.
UNREACHABLE_SQLSTATES = frozenset({"57P01", "57P02", "57P03", "57P05", "53300"})


def database_unreachable(exc: Exception) -> bool:
    """Whether a database error means the database cannot be reached (a 503 worth retrying), rather than a
    failure of this request's statement (a 500). psycopg raises a lost or refused connection without a
    SQLSTATE; Django wraps it, and ``InterfaceError`` is its closed connection. The prepared writes
    (``usermemory.sql.base.prepared_row``) run on a psycopg cursor, whose errors arrive unwrapped."""
    if isinstance(exc, InterfaceError | psycopg.InterfaceError):
        return True
    if isinstance(exc, psycopg.OperationalError):
        sqlstate = exc.sqlstate
    elif isinstance(exc, OperationalError):
        sqlstate = getattr(exc.__cause__, "sqlstate", None)
    else:
        return False
    return sqlstate is None or sqlstate.startswith("08") or sqlstate in UNREACHABLE_SQLSTATES


def request_id_of(request: HttpRequest | None) -> str:
    """The request's id for the log: the ``X-Request-Id`` a proxy or client sent, if it is a plain token,
    else a new one."""
    known = getattr(request, "request_id", None)  # memoryplatform.requestid.RequestIdMiddleware's
    if known:
        return str(known)
    return request_id_from(request.headers.get("X-Request-Id") if request is not None else None)


def _server_error(exc: Exception, context: dict[str, Any]) -> Response:
    """A 500 in the envelope, never retried by our clients, and logged with the traceback under an id the
    answer gives (``details.requestId`` and ``X-Request-Id``): an operator finds the one from the other.
    The traceback names the exceptions and frames, not their messages, which may hold a user id or a query
    (:func:`memoryplatform.logsafe.safe_traceback`)."""
    request_id = request_id_of(context.get("request"))
    logger.error(
        "Unhandled error in %s, request id %s\n%s",
        context.get("view").__class__.__name__,
        request_id,
        safe_traceback(exc),
        extra={"request_id": request_id},
    )
    return Response(
        envelope("Internal server error.", "server_error", {"requestId": request_id}),
        status=status.HTTP_500_INTERNAL_SERVER_ERROR,
        headers={"X-Request-Id": request_id},
    )


def _wants_html(request: HttpRequest) -> bool:
    return request.path.startswith("/admin/")


def handler404(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if _wants_html(request):
        from django.views.defaults import page_not_found

        return page_not_found(request, exception or Http404())
    return JsonResponse(envelope(f"No such path: {request.path}", "not_found"), status=404)


def handler500(request: HttpRequest) -> HttpResponse:
    if _wants_html(request):
        from django.views.defaults import server_error

        return server_error(request)
    return JsonResponse(envelope("Internal server error.", "server_error"), status=500)


def handler400(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return JsonResponse(envelope("Bad request.", "bad_request"), status=400)


def handler403(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if _wants_html(request):
        from django.views.defaults import permission_denied

        return permission_denied(request, exception or PermissionDenied())
    return JsonResponse(envelope("Forbidden.", "forbidden"), status=403)
