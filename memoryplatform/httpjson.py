"""One JSON POST to a model provider (the ``openai`` embedder, the LLM), with the failures every caller maps
the same way: a refused or timed-out call and an answer other than 200 become the caller's own error."""

from typing import Any

import httpx


def post_json(
    client: httpx.Client, endpoint: str, body: dict[str, Any], *, error: type[Exception]
) -> httpx.Response:
    """POST ``body`` as JSON and return the 200 answer; anything else raises ``error`` with a message that
    names the endpoint (the transport's failure, or the status and the first 200 characters answered)."""
    try:
        response = client.post(endpoint, json=body)
    except httpx.HTTPError as exc:
        raise error(f"{endpoint}: {type(exc).__name__}: {exc}") from exc
    if response.status_code != 200:
        raise error(f"{endpoint} answered {response.status_code}: {response.text[:200]}")
    return response
