"""schemathesis checks for .ci/fuzz.py (loaded through SCHEMATHESIS_HOOKS)."""

import json

import schemathesis


@schemathesis.check
def error_envelope(ctx, response, case):  # noqa: ANN001, ANN201 (schemathesis's check signature)
    """Every 4xx and 5xx answer of the API is the error envelope ``{"error", "code", "details"}``, and its
    message carries no Python repr."""
    if response.status_code < 400 or response.status_code == 414:
        return None  # 414: gunicorn's own refusal of a request line over 4 KB, before any app sees it
    try:
        body = json.loads(response.content)
    except ValueError:
        start = response.content[:200]
        raise AssertionError(f"{response.status_code} answer is not JSON: {start!r}") from None
    if not (isinstance(body, dict) and {"error", "code", "details"} <= body.keys()):
        raise AssertionError(f"{response.status_code} answer is not the error envelope: {body!r}"[:500])
    if not isinstance(body["error"], str) or "ErrorDetail(string=" in body["error"]:
        raise AssertionError(f"error message is not clean text: {body['error']!r}"[:500])
    return None
