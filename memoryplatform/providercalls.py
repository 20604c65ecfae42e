"""Each caller's share of the provider calls a process makes on its request threads (issue 53).

A call to a model provider (the LLM, the reranker, the ``openai`` embedder: :mod:`memoryplatform.httpjson`)
holds the request thread that makes it until the answer is whole or ``*_TIMEOUT`` passes. ``serve`` runs
Django on a fixed pool of ``SERVE_THREADS`` threads, so one agent's calls to a slow provider could hold every
thread, and every other agent's reads would wait behind them. So each caller (an agent, or a key without
one) may have at most ``PROVIDER_CALLS_PER_AGENT`` calls in flight per process; a call past that is refused
at once, before anything is sent: the LLM's with :class:`ProviderBusy` (a 429 with ``Retry-After`` at a
door), the reranker's and the embedder's with their own error, so the read answers without them (first-stage
order, full text) as when they fail.

The door names the caller (:func:`calling_as`, around a request); work of no caller (Dream, the background
extraction, the embedding thread) runs on threads of its own and is not bounded here.
"""

import contextlib
import threading
from collections.abc import Iterator
from contextvars import ContextVar
from http import HTTPStatus

from django.conf import settings

from memoryplatform.errors import RateLimited

_caller: ContextVar[str | None] = ContextVar("memoryplatform_provider_caller", default=None)
_in_flight: dict[str, int] = {}
_lock = threading.Lock()

RETRY_AFTER_SECONDS = 1


class ProviderBusy(RateLimited):
    """The caller has ``PROVIDER_CALLS_PER_AGENT`` provider calls in flight already: nothing was sent."""

    status_code = HTTPStatus.TOO_MANY_REQUESTS
    code = "rate_limited"
    retry_after = RETRY_AFTER_SECONDS


@contextlib.contextmanager
def calling_as(caller: str | None) -> Iterator[None]:
    """The provider calls made in the block are ``caller``'s (``None``: no one's, unbounded)."""
    token = _caller.set(caller)
    try:
        yield
    finally:
        _caller.reset(token)


def bind(caller: str) -> None:
    """Name the caller of the rest of the current request (a door that authenticates inside a
    :func:`calling_as` block the request runs in, which restores the previous caller at its end)."""
    _caller.set(caller)


@contextlib.contextmanager
def slot(*, refuse: type[Exception], endpoint: str) -> Iterator[None]:
    """One of the current caller's in-flight provider calls for the block; ``refuse`` (``ProviderBusy``, or
    the provider's error class) when the caller has its ``PROVIDER_CALLS_PER_AGENT`` already."""
    caller = _caller.get()
    if caller is None:
        yield
        return
    bound = settings.PROVIDER_CALLS_PER_AGENT
    with _lock:
        held = _in_flight.get(caller, 0)
        if held >= bound:
            busy = True
        else:
            busy = False
            _in_flight[caller] = held + 1
    if busy:
        message = (
            f"{endpoint}: {bound} provider calls of this caller are in flight already "
            "(PROVIDER_CALLS_PER_AGENT); try again when one has answered."
        )
        raise refuse(message)
    try:
        yield
    finally:
        with _lock:
            left = _in_flight[caller] - 1
            if left:
                _in_flight[caller] = left
            else:
                del _in_flight[caller]
