"""One JSON POST to a model provider (the ``openai`` embedder, the LLM, the reranker), with the failures every
caller maps the same way: a refused or timed-out call, an answer other than 200, an answer larger than
:data:`MAX_ANSWER_BYTES`, and an answer that is not JSON as the doors take it
(:func:`memoryplatform.text.json_loads`: no key twice, no ``NaN``; then
:func:`memoryplatform.text.json_problem`: nothing nested deeper than ``MAX_JSON_DEPTH``, no infinite number,
no NUL) become the caller's own error. A provider's answer is parsed here only, one way, so no caller meets a
``RecursionError`` or a non-finite number.

**The timeout bounds the whole call** (``EMBEDDINGS_TIMEOUT``, ``LLM_TIMEOUT``, ``RERANK_TIMEOUT``):
connecting, sending, and every read until the body is complete. httpx's own timeout bounds each read, so a
server that sends a byte a little faster than that would hold the caller without end. The exchange runs on a
worker of a shared pool (:data:`CALL_THREADS`) and the caller waits for it until the deadline, then raises its
error; the worker reads the body in chunks, checks the deadline after each, and stops at its next check or
read timeout (at most one timeout later), closing its connection. A caller is never held longer than its
timeout, even while every worker is busy: its call then waits in the pool's queue, within the same deadline,
and is dropped unstarted when it passes."""

import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from memoryplatform import providercalls
from memoryplatform.text import json_loads, json_problem

MAX_ANSWER_BYTES = 16 * 1024 * 1024
"""The largest answer read: an embeddings answer of 64 vectors of 3,072 dimensions is about 5 MB as text."""

CALL_THREADS = 32
"""Workers running provider calls, per process, started as calls need them. A worker outlives its caller by
at most one timeout, so this is well above twice the threads that call (``SERVE_THREADS``, 4, and the
background work's)."""


def _new_pool() -> None:
    """This process's pool. A forked child gets its own: the parent's workers do not exist there, and a pool
    that counted them idle would never start one."""
    global _calls
    _calls = ThreadPoolExecutor(max_workers=CALL_THREADS, thread_name_prefix="provider-call")


_calls: ThreadPoolExecutor
_new_pool()
os.register_at_fork(after_in_child=_new_pool)


class _Late(Exception):
    """The call's deadline passed before its answer was whole."""


class _TooLarge(Exception):
    """The answer is larger than :data:`MAX_ANSWER_BYTES`."""


class ProviderClient:
    """One provider's HTTP client: its headers, its timeout (bounding each whole call), its error class, and
    the error of a call refused because its caller has its share of calls in flight already (``busy``:
    :mod:`memoryplatform.providercalls`; the error class when not given)."""

    def __init__(
        self,
        *,
        timeout: float,
        headers: dict[str, str],
        error: type[Exception],
        busy: type[Exception] | None = None,
    ) -> None:
        self.timeout = timeout
        self._error = error
        self._busy = busy or error
        self._client = httpx.Client(timeout=timeout, headers=headers)

    def post_json(self, endpoint: str, body: dict[str, Any]) -> Any:
        """POST ``body`` as JSON and return the 200 answer's JSON, within the timeout; anything else raises
        the error class with a message that names the endpoint (the transport's failure, the status and the
        first 200 characters answered, or why the answer is not usable JSON). Past the caller's share of
        calls in flight, the ``busy`` error, before anything is sent."""
        with providercalls.slot(refuse=self._busy, endpoint=endpoint):
            return self._post_json(endpoint, body)

    def _post_json(self, endpoint: str, body: dict[str, Any]) -> Any:
        deadline = time.monotonic() + self.timeout
        call = _calls.submit(self._exchange, endpoint, body, deadline)
        try:
            status, raw = call.result(timeout=max(0.0, deadline - time.monotonic()))
        except (TimeoutError, _Late):
            call.cancel()  # dropped if it has not started; else it stops at its own next check
            raise self._error(f"{endpoint}: Timeout: no whole answer within {self.timeout:g} s") from None
        except _TooLarge:
            raise self._error(f"{endpoint}: an answer larger than {MAX_ANSWER_BYTES} bytes") from None
        except httpx.HTTPError as exc:
            raise self._error(f"{endpoint}: {type(exc).__name__}: {exc}") from exc
        if status != 200:
            raise self._error(f"{endpoint} answered {status}: {raw.decode(errors='replace')[:200]}")
        return answer_json(endpoint, raw, error=self._error)

    def _exchange(self, endpoint: str, body: dict[str, Any], deadline: float) -> tuple[int, bytes]:
        """On a worker: the answer's status and body, read in chunks until whole, the deadline checked after
        each chunk and the size after each too."""
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise _Late
        with self._client.stream("POST", endpoint, json=body, timeout=remaining) as response:
            declared = response.headers.get("Content-Length", "")
            if declared.isascii() and declared.isdigit() and int(declared) > MAX_ANSWER_BYTES:
                raise _TooLarge
            chunks: list[bytes] = []
            size = 0
            for chunk in response.iter_bytes():
                size += len(chunk)
                if size > MAX_ANSWER_BYTES:
                    raise _TooLarge
                if time.monotonic() > deadline:
                    raise _Late
                chunks.append(chunk)
            return response.status_code, b"".join(chunks)


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
