"""schemathesis checks for .ci/fuzz.py (loaded through SCHEMATHESIS_HOOKS)."""

import json
import urllib.parse

import schemathesis


@schemathesis.check
def error_envelope(ctx, response, case):  # noqa: ANN001, ANN201 (schemathesis's check signature)
    """Every 4xx and 5xx answer of the API is the error envelope ``{"error", "code", "details"}``, and its
    message carries no Python repr."""
    if response.status_code < 400:
        return None
    try:
        body = json.loads(response.content)
    except ValueError:
        start = response.content[:200]
        raise AssertionError(f"{response.status_code} answer is not JSON: {start!r}") from None
    if not (isinstance(body, dict) and {"error", "code", "details"} <= body.keys()):
        raise AssertionError(f"{response.status_code} answer is not the error envelope: {body!r}"[:500])
    if not isinstance(body["error"], str):
        raise AssertionError(f"error message is not text: {body['error']!r}"[:500])
    if REPR in body["error"] and not _sent(response, REPR):  # an echoed input is not a repr
        raise AssertionError(f"error message carries a Python repr: {body['error']!r}"[:500])
    return None


REPR = "ErrorDetail(string="


def _sent(response, text: str) -> bool:  # noqa: ANN001
    """Whether the request carried ``text`` (in its URL, decoded, or its body)."""
    request = response.request
    body = request.body or b""
    sent = urllib.parse.unquote(request.url or "") + (
        body.decode(errors="replace") if isinstance(body, bytes) else body
    )
    return text in sent or json.dumps(text)[1:-1] in sent
