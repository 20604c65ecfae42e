"""Typed exceptions. Every refusal of the server carries its error envelope:
``{"error": "<human message>", "code": "<machine code>", "details": {...}}``."""

from __future__ import annotations

from typing import Any


class MemoryPlatformError(Exception):
    """Base of every error this client raises."""


class APIConnectionError(MemoryPlatformError):
    """The server could not be reached, or the connection broke or timed out (after the retries)."""


class APIError(MemoryPlatformError):
    """The server answered with an error: ``status``, and the envelope's ``code``, ``error``, ``details``."""

    def __init__(
        self,
        error: str,
        *,
        status: int,
        code: str,
        details: dict[str, Any] | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(f"{status} {code}: {error}")
        self.error = error
        self.status = status
        self.code = code
        self.details: dict[str, Any] = details or {}
        self.retry_after = retry_after


class BadRequestError(APIError):
    """400 ``bad_request`` (bad input, a guardrail) and other 4xx without a class of their own."""


class QueryTooLongError(BadRequestError):
    """A query (``q``) longer than :data:`memoryplatform_client.MAX_QUERY_CHARS`, refused before it is sent:
    the 400 ``bad_request`` the server would answer (``details``: the limit and the query's length)."""

    def __init__(self, length: int, limit: int) -> None:
        super().__init__(
            f"q is {length} characters; a query may have at most {limit}.",
            status=400,
            code="bad_request",
            details={"limit": "MAX_QUERY_CHARS", "max": limit, "length": length},
        )


class AuthenticationError(APIError):
    """401 ``unauthorized``: a missing, unknown, revoked or expired key."""


class PermissionDeniedError(APIError):
    """403 ``forbidden``: the key's role or agent may not do this."""


class NotFoundError(APIError):
    """404 ``not_found``."""


class ConflictError(APIError):
    """409 ``conflict``."""


class CapacityError(ConflictError):
    """409 ``capacity``: the user's memory cap is reached."""


class PayloadTooLargeError(APIError):
    """413 ``payload_too_large``."""


class RateLimitedError(APIError):
    """429 ``rate_limited`` (writes per turn; an agent's LLM budget: ``details``, ``retry_after``)."""


class ServerError(APIError):
    """5xx ``server_error``."""


class UnavailableError(ServerError):
    """503 ``unavailable``: retry later (``retry_after`` seconds)."""


_BY_STATUS: dict[int, type[APIError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    413: PayloadTooLargeError,
    429: RateLimitedError,
    503: UnavailableError,
}


def error_for(*, status: int, body: Any, text: str = "", retry_after: float | None = None) -> APIError:
    """The exception for an error answer: its envelope when it has one, else the status and the raw text."""
    if isinstance(body, dict) and isinstance(body.get("error"), str):
        message = body["error"]
        code = str(body.get("code") or "")
        details = body.get("details") if isinstance(body.get("details"), dict) else {}
    else:
        message, code, details = (text.strip()[:500] or f"HTTP {status}"), "", {}
    if not code:
        code = "server_error" if status >= 500 else "bad_request"
    if code == "capacity":
        cls: type[APIError] = CapacityError
    else:
        cls = _BY_STATUS.get(status) or (ServerError if status >= 500 else BadRequestError)
    return cls(message, status=status, code=code, details=details, retry_after=retry_after)
