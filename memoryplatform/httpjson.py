"""One JSON POST to a model provider (the ``openai`` embedder, the LLM, the reranker), with the failures every
caller maps the same way: a refused or timed-out call, an answer other than 200, and an answer that is not
JSON as the doors take it (:func:`memoryplatform.text.json_loads`: no key twice, no ``NaN``; then
:func:`memoryplatform.text.json_problem`: nothing nested deeper than ``MAX_JSON_DEPTH``, no infinite
number, no NUL) become the caller's own error. A provider's answer is parsed here only, one way, so no caller
meets a ``RecursionError`` or a non-finite number."""

from typing import Any

import httpx

from memoryplatform.text import json_loads, json_problem


def post_json(client: httpx.Client, endpoint: str, body: dict[str, Any], *, error: type[Exception]) -> Any:
    """POST ``body`` as JSON and return the 200 answer's JSON; anything else raises ``error`` with a message
    that names the endpoint (the transport's failure, the status and the first 200 characters answered, or
    why the answer is not usable JSON)."""
    try:
        response = client.post(endpoint, json=body)
    except httpx.HTTPError as exc:
        raise error(f"{endpoint}: {type(exc).__name__}: {exc}") from exc
    if response.status_code != 200:
        raise error(f"{endpoint} answered {response.status_code}: {response.text[:200]}")
    return answer_json(endpoint, response.content, error=error)


def answer_json(endpoint: str, raw: bytes, *, error: type[Exception]) -> Any:
    """The JSON of a provider's answer ``raw``, or ``error``."""
    try:
        value = json_loads(raw)
    except RecursionError as exc:  # the parser's own depth, before json_problem can look
        raise error(f"{endpoint}: the answer is not usable JSON: nested too deep") from exc
    except ValueError as exc:  # not JSON, not UTF-8, a key twice, NaN or Infinity
        raise error(f"{endpoint}: the answer is not JSON: {exc}") from exc
    problem = json_problem(value)
    if problem:
        raise error(f"{endpoint}: the answer is not usable JSON: {problem}")
    return value
