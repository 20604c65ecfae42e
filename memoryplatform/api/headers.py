"""The headers several REST doors share: the turn a write belongs to (``X-Turn-Id``, a request header) and
what answered a ranked read when a stage was down (``X-Search-Fallback``, a response header)."""

from typing import Any, Protocol

from drf_spectacular.utils import OpenApiParameter
from rest_framework.request import Request

from memoryplatform.errors import BadRequest
from memoryplatform.text import text_problem

MAX_TURN_ID_CHARS = 128

TURN_HEADER = OpenApiParameter(
    "X-Turn-Id",
    str,
    OpenApiParameter.HEADER,
    description=f"The turn the write belongs to (its first {MAX_TURN_ID_CHARS} characters)",
)
FALLBACK_HEADER = OpenApiParameter(
    "X-Search-Fallback",
    str,
    OpenApiParameter.HEADER,
    response=True,
    enum=["fulltext"],
    description="Set when the embedder was down: the results were ranked by full text alone",
)


def turn_id_of(request: Request, body: Any) -> str | None:
    """The turn a write belongs to: ``X-Turn-Id``, else the body's ``turnId`` (``body`` may be ``None``, or
    a list: a batch has no ``turnId`` of its own), cut to its first 128 characters. A 400 when it is no
    string, or holds what no database stores."""
    turn_id = request.headers.get("X-Turn-Id") or (body.get("turnId") if isinstance(body, dict) else None)
    if turn_id is None:
        return None
    if not isinstance(turn_id, str):
        raise BadRequest("turnId must be a string.")
    problem = text_problem(turn_id)
    if problem:
        raise BadRequest(f"turnId {problem}.")
    return turn_id[:MAX_TURN_ID_CHARS]


class Ranked(Protocol):
    """A ranked read's answer: ``fallback`` names what answered when a stage was down (``fulltext``,
    ``unreranked``), or is ``None``."""

    @property
    def fallback(self) -> str | None: ...


def fallback_headers(ranked: Ranked | None) -> dict[str, str] | None:
    """The ``X-Search-Fallback`` header of a ranked read that a stage did not answer (none: ``None``)."""
    return {"X-Search-Fallback": ranked.fallback} if ranked and ranked.fallback else None
