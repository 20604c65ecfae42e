"""The domain's errors: what a service raises when it refuses. Every door translates them: REST to the error
envelope (:mod:`memoryplatform.api.errors`), the LLM tools and MCP to their own refusals, the admin to a
message, the commands to ``CommandError``.

Each carries a human ``message``, machine ``details``, the envelope's ``code`` and the HTTP status a web door
answers with, so that every door says the same thing of one refusal.
"""

from http import HTTPStatus
from typing import Any


class ServiceError(Exception):
    """A refusal from a service, carrying its HTTP status and machine code."""

    status_code: int = HTTPStatus.BAD_REQUEST
    code = "bad_request"
    retry_after: int | None = None  # seconds: a web door sends it as Retry-After

    def __init__(self, message: str, *, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details or {}


class BadRequest(ServiceError):
    pass


class Forbidden(ServiceError):
    status_code = HTTPStatus.FORBIDDEN
    code = "forbidden"


class NotFound(ServiceError):
    status_code = HTTPStatus.NOT_FOUND
    code = "not_found"


class Conflict(ServiceError):
    status_code = HTTPStatus.CONFLICT
    code = "conflict"


class CursorExpired(ServiceError):
    """A position the store no longer holds everything after: a change feed cursor from before events the
    retention deleted."""

    status_code = HTTPStatus.GONE
    code = "cursor_expired"


class CapacityReached(ServiceError):
    status_code = HTTPStatus.CONFLICT
    code = "capacity"


class RateLimited(ServiceError):
    status_code = HTTPStatus.TOO_MANY_REQUESTS
    code = "rate_limited"


class Unavailable(ServiceError):
    """What the request needs is not configured here (no LLM): a state of the server, not the request's
    fault, and no server error either (nothing failed)."""

    status_code = HTTPStatus.CONFLICT
    code = "unavailable"


class UpstreamFailed(ServiceError):
    """A provider the platform called (an LLM) failed or gave an answer that was refused; nothing changed."""

    status_code = HTTPStatus.BAD_GATEWAY
    code = "upstream_failed"
