"""One webhook request: the signature, the address check, the POST.

- The signature is HMAC-SHA256, keyed by the subscription's secret, over ``"<timestamp>." + body``; it goes
  in ``Webhook-Signature: v1=<hex>`` (two, comma-separated, while a rotated-out secret still signs) with
  ``Webhook-Timestamp`` (Unix seconds) and ``Webhook-Id`` (the event's id: a receiver that has seen it drops
  the duplicate of an at-least-once delivery).
- The host is resolved and every address checked (:func:`check_addresses`): a private, loopback,
  link-local, shared or reserved one is refused unless ``WEBHOOK_ALLOW_PRIVATE``. At delivery the request
  goes to the very address that was checked (the URL's host in ``Host`` and, for TLS, in SNI and the
  certificate check), so a DNS answer that changes between the check and the connection (rebinding) reaches
  nothing private.
- The whole request (resolution, connection, sending, the answer) has one deadline (``WEBHOOK_TIMEOUT``), not
  a timeout per read, so a receiver that trickles its answer is cut at it; no redirect is followed; at most
  :data:`MAX_ANSWER_BYTES` of the answer are read.
"""

import hashlib
import hmac
import ipaddress
import socket
import ssl
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

import anyio
import certifi
import httpx

MAX_ANSWER_BYTES = 4096
SIGNATURE_VERSION = "v1"


class AddressRefused(Exception):
    """The URL's host is not a public address (or does not resolve)."""


def sign(*, secret: str, timestamp: int, body: bytes) -> str:
    """The ``Webhook-Signature`` header's value for ``body`` sent at ``timestamp``."""
    digest = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"{SIGNATURE_VERSION}={digest}"


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    address = ipaddress.ip_address(text.partition("%")[0])  # an IPv6 scope ("fe80::1%eth0") is no part of it
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def check_addresses(addresses: list[str], *, allow_private: bool) -> str:
    """The first of a host's ``addresses`` once every one is public (or ``allow_private``)."""
    if not addresses:
        raise AddressRefused("The webhook's host has no address.")
    if not allow_private:
        for text in addresses:
            if not _address(text).is_global:
                raise AddressRefused(
                    "The webhook's host resolves to a private or loopback address; the operator may allow "
                    "them with WEBHOOK_ALLOW_PRIVATE."
                )
    return addresses[0]


def resolve(url: str, *, allow_private: bool) -> str:
    """The checked address of ``url``'s host (blocking: for the subscription's door)."""
    parts = httpx.URL(url)
    try:
        infos = socket.getaddrinfo(parts.host, parts.port or 443, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise AddressRefused("The webhook's host does not resolve.") from exc
    return check_addresses([str(info[4][0]) for info in infos], allow_private=allow_private)


@cache
def _tls() -> ssl.SSLContext:
    """One TLS context for every delivery: building one (loading the CA bundle) costs more than a request on
    loopback."""
    return ssl.create_default_context(cafile=certifi.where())


@dataclass(frozen=True)
class Answer:
    """What a delivery got: the status and the answer's first bytes, or what went wrong."""

    status: int | None
    text: str
    error: str
    duration_ms: int

    @property
    def ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


async def _post(url: str, *, body: bytes, headers: dict[str, str], allow_private: bool) -> tuple[int, bytes]:
    parts = httpx.URL(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        infos = await anyio.getaddrinfo(parts.host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise AddressRefused("The webhook's host does not resolve.") from exc
    address = check_addresses([str(info[4][0]) for info in infos], allow_private=allow_private)
    pinned = parts.copy_with(host=address)
    extensions = {"sni_hostname": parts.host} if parts.scheme == "https" else {}
    headers = {**headers, "Host": parts.netloc.decode("ascii")}
    async with (
        # The deadline is post()'s fail_after over the whole request, not a timeout per read.
        httpx.AsyncClient(verify=_tls(), follow_redirects=False, trust_env=False, timeout=None) as client,  # noqa: S113
        client.stream("POST", pinned, content=body, headers=headers, extensions=extensions) as answer,
    ):
        read = b""
        async for chunk in answer.aiter_raw():
            read += chunk
            if len(read) >= MAX_ANSWER_BYTES:
                break
        return answer.status_code, read[:MAX_ANSWER_BYTES]


def post(
    url: str, *, body: bytes, event_id: str, secrets: Sequence[str], timeout: float, allow_private: bool
) -> Answer:
    """POST ``body`` to ``url``, signed with each of ``secrets`` (the current one first; a rotated-out one
    too for its grace period, comma-separated), within ``timeout`` seconds in all."""
    timestamp = int(time.time())
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "memoryplatform-webhooks/1",
        "Webhook-Id": event_id,
        "Webhook-Timestamp": str(timestamp),
        "Webhook-Signature": ", ".join(
            sign(secret=secret, timestamp=timestamp, body=body) for secret in secrets
        ),
    }
    started = time.monotonic()

    async def bounded() -> tuple[int, bytes]:
        with anyio.fail_after(timeout):
            return await _post(url, body=body, headers=headers, allow_private=allow_private)

    status: int | None = None
    text = error = ""
    try:
        status, raw = anyio.run(bounded)
        text = raw.decode("utf-8", errors="replace").replace("\x00", "\ufffd")  # no NUL in a text column
    except TimeoutError:
        error = f"No whole answer within {timeout:g} s."
    except AddressRefused as exc:
        error = str(exc)
    except httpx.HTTPError as exc:
        error = f"{type(exc).__name__}: the request failed."
    except OSError as exc:
        error = f"{type(exc).__name__}: the connection failed."
    return Answer(status, text, error, int((time.monotonic() - started) * 1000))
