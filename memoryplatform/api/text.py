"""Checks on text and JSON that every door applies before a value can reach the database.

PostgreSQL refuses NUL (``\\u0000``) in text and jsonb, and no database can store a lone surrogate
(``"\\ud800"``: not encodable as UTF-8). A number such as ``1e400`` parses as infinity, which no JSON
column stores and no JSON answer can carry. A value nested deeper than :data:`MAX_JSON_DEPTH` is refused too,
so no later step (rendering, search text, Dream) recurses without bound. A query longer than
:data:`MAX_QUERY_CHARS` is refused at every door, before anything embeds or parses it.
"""

import math
from typing import Any

from memoryplatform.api.errors import BadRequest

MAX_JSON_DEPTH = 64
MAX_QUERY_CHARS = 1000
"""The longest query any door takes, defined here once: REST's ``q`` (a user's search, search across users,
recall by relevance, a conversation's context, conversation search), the LLM tools' ``query`` and MCP's,
each read from this constant (serializer ``max_length``, the tools' ``maxLength``). The Python client mirrors
it as ``memoryplatform_client.MAX_QUERY_CHARS`` (a test holds the two equal). A query is embedded whole, so
this bounds what one search costs; the embedder's own bound is EMBEDDINGS_MAX_CHARS."""
MAX_ID = 2**63 - 1
"""The largest id a 64-bit primary key holds."""


def ascii_int(text: str, *, low: int = 0, high: int = MAX_ID) -> int | None:
    """The whole number ``text`` writes in ASCII digits, if it lies in ``low..high``; else ``None``.

    ``str.isdigit`` and ``int()`` also read other scripts' digits (``"١"`` is 1), so one id would answer to
    many spellings; and an unbounded number reaches the database as an out-of-range error.
    """
    if not (text.isascii() and text.isdigit()) or len(text) > len(str(high)):
        return None
    value = int(text)
    return value if low <= value <= high else None


def query_problem(query: str, *, name: str = "q") -> str | None:
    """Why ``query`` is refused as a search or recall query (too long), or ``None``."""
    if len(query) > MAX_QUERY_CHARS:
        return f"{name} is {len(query)} characters; a query may have at most {MAX_QUERY_CHARS}."
    return None


def check_query(query: str, *, name: str = "q") -> None:
    """Refuse a query over :data:`MAX_QUERY_CHARS` (:class:`BadRequest`): the selectors' own check, so a door
    that forgot the limit still never embeds or parses a longer one."""
    problem = query_problem(query, name=name)
    if problem:
        raise BadRequest(problem, details={"limit": "MAX_QUERY_CHARS", "max": MAX_QUERY_CHARS})


def text_problem(text: str) -> str | None:
    """Why ``text`` cannot be stored, or ``None`` when it can."""
    if "\x00" in text:
        return "contains a NUL character (\\u0000)"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "contains a lone surrogate (not valid Unicode)"
    return None


def json_problem(value: Any, *, max_depth: int = MAX_JSON_DEPTH) -> str | None:
    """Why a parsed JSON value cannot be stored (a bad string or key anywhere, or too deep), or ``None``.

    Walks with an explicit stack, so a deep value cannot exhaust Python's recursion limit here.
    """
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            problem = text_problem(item)
            if problem:
                return f"a string {problem}"
        elif isinstance(item, float) and not math.isfinite(item):
            return "a number is out of range (JSON numbers are finite)"
        elif isinstance(item, dict | list):
            if depth > max_depth:
                return f"nested more than {max_depth} levels deep"
            if isinstance(item, dict):
                for key, child in item.items():
                    stack.append((key, depth))
                    stack.append((child, depth + 1))
            else:
                stack.extend((child, depth + 1) for child in item)
    return None
