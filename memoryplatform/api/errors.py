"""One error envelope for every API answer that is not a success.

``{"error": "<human message>", "code": "<machine code>", "details": {...}}``

Services raise :class:`memoryplatform.errors.ServiceError` subclasses; DRF's own exceptions (parse errors,
auth, throttling, 405) and Django's 404/500 handlers are translated to the same shape here.
"""

import logging
from typing import Any

from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import InterfaceError, OperationalError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from rest_framework import exceptions, status
from rest_framework.response import Response

from memoryplatform.errors import ServiceError

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


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response:
    headers: dict[str, str] = {}
    if isinstance(exc, ServiceError):
        return Response(envelope(exc.message, exc.code, exc.details), status=exc.status_code)
    if isinstance(exc, RequestDataTooBig):
        return Response(
            envelope("Request body is too large.", "payload_too_large"),
            status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
        )
    if isinstance(exc, OperationalError | InterfaceError):
        # The database went away mid-request (a restart, a crash, a lost connection) or cancelled the
        # statement: nothing was half-written (the transaction is gone with it); the next request reconnects.
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
        logger.exception("Unhandled error in %s", context.get("view").__class__.__name__)
        return Response(envelope("Internal server error.", "server_error"), status=500)

    auth_header = getattr(exc, "auth_header", None)
    if auth_header:
        headers["WWW-Authenticate"] = auth_header
    wait = getattr(exc, "wait", None)
    if wait:
        headers["Retry-After"] = str(int(wait))

    code = _CODES_BY_STATUS.get(exc.status_code, "bad_request")
    if isinstance(exc, exceptions.ValidationError):
        details = {"fields": exc.detail} if isinstance(exc.detail, dict) else {"errors": exc.detail}
        return Response(envelope(first_message(exc.detail), code, details), status=exc.status_code)
    return Response(envelope(first_message(exc.detail), code), status=exc.status_code, headers=headers)


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
