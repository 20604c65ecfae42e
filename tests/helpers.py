"""Shared test helpers: markers for real services, and the error-envelope assertion."""

import contextlib
import os
import signal
import subprocess
from typing import Any

import pytest

# PostgreSQL: the embedded default (no DATABASE_URL) or a postgres:// DATABASE_URL. Read from the environment,
# as settings do, so that .ci/fuzz.py can import these helpers before Django is set up.
_DATABASE_URL = os.environ.get("DATABASE_URL", "")
ON_POSTGRES = not _DATABASE_URL or _DATABASE_URL.startswith(("postgres://", "postgresql://"))
REDIS_URL = os.environ.get("REDIS_URL", "")

needs_postgres = pytest.mark.skipif(
    not ON_POSTGRES, reason="needs PostgreSQL: unset DATABASE_URL or set DATABASE_URL=postgres://..."
)
needs_redis = pytest.mark.skipif(not REDIS_URL, reason="needs Redis: set REDIS_URL=redis://...")


def assert_envelope(response: Any, status: int, code: str) -> dict[str, Any]:
    """The response is the error envelope with this status and code."""
    assert response.status_code == status, (response.status_code, response.content[:500])
    body = response.json()
    assert set(body) == {"error", "code", "details"}, body
    assert body["code"] == code, body
    assert isinstance(body["error"], str) and body["error"]
    return body


def stop_process_group(process: subprocess.Popen[Any], *, timeout: float = 20) -> None:
    """End a server started with ``start_new_session=True``, its workers too: SIGTERM, then SIGKILL."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    with contextlib.suppress(ProcessLookupError):  # a worker that outlived its master is ended too
        os.killpg(process.pid, signal.SIGKILL)
