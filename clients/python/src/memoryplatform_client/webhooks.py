"""Verifying a webhook delivery: :func:`verify_webhook` checks its ``Webhook-Signature`` (HMAC-SHA256, keyed
by the subscription's secret, over ``"<Webhook-Timestamp>." + body``) and its age, and returns the event.

Give it the body's raw bytes, as received, before any JSON parsing: a re-serialised body signs differently.
Deliveries are at least once: keep the ``id`` of the events handled and drop one seen before.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Mapping
from typing import Any

DEFAULT_TOLERANCE_SECONDS = 300


class WebhookVerificationError(Exception):
    """The delivery is not signed by the secret, or its timestamp is too old or too new."""


def _header(headers: Mapping[str, str], name: str) -> str:
    for key, value in headers.items():
        if key.lower() == name.lower():
            return value
    raise WebhookVerificationError(f"No {name} header.")


def verify_webhook(
    *,
    secret: str,
    body: bytes | str,
    headers: Mapping[str, str],
    tolerance_seconds: int = DEFAULT_TOLERANCE_SECONDS,
    now: float | None = None,
) -> dict[str, Any]:
    """The event a delivery carries, once its signature and timestamp check out; else
    :class:`WebhookVerificationError`."""
    raw = body.encode() if isinstance(body, str) else body
    timestamp_text = _header(headers, "Webhook-Timestamp")
    if not timestamp_text.isascii() or not timestamp_text.isdigit():
        raise WebhookVerificationError("Webhook-Timestamp is not a whole number of seconds.")
    timestamp = int(timestamp_text)
    if abs((time.time() if now is None else now) - timestamp) > tolerance_seconds:
        raise WebhookVerificationError("Webhook-Timestamp is outside the tolerance.")
    expected = hmac.new(secret.encode(), f"{timestamp}.".encode() + raw, hashlib.sha256).hexdigest()
    signatures = [part.strip() for part in _header(headers, "Webhook-Signature").split(",")]
    if not any(hmac.compare_digest(f"v1={expected}", given) for given in signatures):
        raise WebhookVerificationError("The signature does not match.")
    event: dict[str, Any] = json.loads(raw)
    return event
