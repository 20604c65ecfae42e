"""What the sync and async clients share: a request is a :class:`Call` (method, path, query, body, how to read
the answer), built once in :mod:`memoryplatform_client._calls`; each client only sends it, with the same
retry rule (:func:`retry_delay`) and the same decoding (:meth:`Call.finish`)."""

from __future__ import annotations

import email.utils
import functools
import random
import ssl
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx

from memoryplatform_client.errors import error_for

__version__ = "0.1.0"

T = TypeVar("T")

DEFAULT_TIMEOUT = 30.0
DEFAULT_MAX_RETRIES = 2
IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "PUT", "DELETE"})
RETRY_STATUSES = frozenset({429, 503})
MAX_RETRY_AFTER = 60.0

QueryValue = str | int | float | bool | None | list[str]


def segment(value: str | int) -> str:
    """One path segment, percent-encoded: a userId or key may hold ``/``, spaces and any unicode."""
    return quote(str(value), safe="")


def query(**values: QueryValue) -> list[tuple[str, str]]:
    """Query parameters without the ``None`` ones; a list repeats its name (``groupId=a&groupId=b``)."""
    pairs: list[tuple[str, str]] = []
    for name, value in values.items():
        if value is None:
            continue
        if isinstance(value, list):
            pairs.extend((name, str(item)) for item in value)
        elif isinstance(value, bool):
            pairs.append((name, "true" if value else "false"))
        else:
            pairs.append((name, str(value)))
    return pairs


def iso_time(when: datetime | str | None) -> str | None:
    """A time as sent: a datetime in ISO 8601, text as given."""
    return when.isoformat() if isinstance(when, datetime) else when


def body(**values: Any) -> dict[str, Any]:
    """A JSON body without the ``None`` values (left out, the server's defaults apply)."""
    return {name: value for name, value in values.items() if value is not None}


def _json(response: httpx.Response) -> Any:
    return response.json()


@dataclass(frozen=True)
class Call(Generic[T]):
    """One API request and how to read its answer."""

    method: str
    path: str
    params: list[tuple[str, str]] = field(default_factory=list)
    json: Any = None
    decode: Callable[[httpx.Response], T] = _json
    headers: Mapping[str, str] = field(default_factory=dict)

    @property
    def idempotent(self) -> bool:
        """Only these are retried: sending them twice has the effect of sending them once."""
        return self.method in IDEMPOTENT_METHODS

    def request_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"params": self.params or None, "headers": dict(self.headers) or None}
        if self.json is not None:
            kwargs["json"] = self.json
        return kwargs

    def finish(self, response: httpx.Response) -> T:
        """The decoded answer, or the typed exception for an error answer."""
        if response.status_code >= 400:
            try:
                envelope = response.json()
            except ValueError:
                envelope = None
            raise error_for(
                status=response.status_code,
                body=envelope,
                text=response.text,
                retry_after=retry_after_seconds(response),
            )
        return self.decode(response)


def retry_after_seconds(response: httpx.Response) -> float | None:
    """``Retry-After`` in seconds (a number or an HTTP date), at most :data:`MAX_RETRY_AFTER`."""
    raw = response.headers.get("Retry-After")
    if not raw:
        return None
    try:
        seconds = float(raw)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(raw)
        except (TypeError, ValueError):
            return None
        seconds = when.timestamp() - time.time()
    return min(max(seconds, 0.0), MAX_RETRY_AFTER)


@dataclass(frozen=True)
class RetryPolicy:
    """Retries of idempotent calls (GET, PUT, DELETE) on 429, 503 and connection errors: exponential backoff
    with jitter, or the server's ``Retry-After`` when it sends one. POSTs are never retried."""

    max_retries: int = DEFAULT_MAX_RETRIES
    backoff: float = 0.5
    max_backoff: float = 8.0

    def delay(self, attempt: int, response: httpx.Response | None) -> float:
        if response is not None:
            told = retry_after_seconds(response)
            if told is not None:
                return told
        ceiling = min(self.max_backoff, self.backoff * (2**attempt))
        return ceiling / 2 + random.uniform(0, ceiling / 2)  # noqa: S311 (jitter, not a secret)


def retry_delay(
    policy: RetryPolicy, call: Call[Any], attempt: int, response: httpx.Response | None
) -> float | None:
    """How long to wait before sending ``call`` again after ``attempt`` (0 for the first try), or ``None``
    when it must not be retried. ``response`` is ``None`` after a connection error."""
    if not call.idempotent or attempt >= policy.max_retries:
        return None
    if response is not None and response.status_code not in RETRY_STATUSES:
        return None
    return policy.delay(attempt, response)


@functools.cache
def shared_tls_context() -> ssl.SSLContext:
    """httpx's default TLS context (certifi's CAs, or ``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` when set), made
    once a process and shared by every client: making one loads the whole CA bundle (17 ms, which each client
    made paid again: bench/client_start.py)."""
    return httpx.create_ssl_context()


def client_options(
    *, base_url: str, api_key: str, timeout: float | httpx.Timeout, headers: Mapping[str, str] | None
) -> dict[str, Any]:
    """The keyword arguments of ``httpx.Client`` / ``httpx.AsyncClient`` for one key and server."""
    return {
        "base_url": base_url.rstrip("/"),
        "timeout": timeout,
        "verify": shared_tls_context(),
        "headers": {
            "Authorization": f"Bearer {api_key}",
            "Accept": "application/json",
            "User-Agent": f"memoryplatform-client/{__version__}",
            **(headers or {}),
        },
    }


HttpT = TypeVar("HttpT", httpx.Client, httpx.AsyncClient)
TransportT = TypeVar("TransportT", httpx.BaseTransport, httpx.AsyncBaseTransport)


class ClientBase(Generic[HttpT, TransportT]):
    """The set-up the sync and the async client share: one key's httpx client (``http_class``:
    ``httpx.Client`` or ``httpx.AsyncClient``, on ``transport`` when given) and the retry policy."""

    http_class: Callable[..., HttpT]

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float | httpx.Timeout = DEFAULT_TIMEOUT,
        max_retries: int = DEFAULT_MAX_RETRIES,
        headers: Mapping[str, str] | None = None,
        transport: TransportT | None = None,
    ) -> None:
        self.retry_policy = RetryPolicy(max_retries=max_retries)
        self._http: HttpT = self.http_class(
            **client_options(base_url=base_url, api_key=api_key, timeout=timeout, headers=headers),
            transport=transport,
        )
