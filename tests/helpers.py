"""Shared test helpers: the error-envelope assertion, a server process group's end, the test database's URL
for subprocesses, and a scheduler process on it.

A test that needs a live server shares one: pytest-django's ``live_server`` (one a worker, in process, on the
test database), or a ``manage.py serve`` subprocess in a fixture of module or package scope
(tests/agenttools/mcp_harness.py), started on a :func:`free_port` and waited for with :func:`wait_ready`
(``/readyz``), never a sleep. Only a test that changes the server itself (its settings, its environment, a
stop) starts one of its own. Each pytest-xdist worker starts its own copy of a shared fixture, so a fixture
of module scope costs one start a worker that runs any of the module's tests."""

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote


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


def stop_process(process: subprocess.Popen[Any], *, timeout: float = 15) -> None:
    """End a child process: SIGTERM, then SIGKILL."""
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def manage(env: dict[str, str], *args: str, cwd: Path | None = None) -> str:
    """Run ``manage.py`` with ``args`` in a process of its own; its standard output (it must succeed)."""
    result = subprocess.run(  # noqa: S603
        [sys.executable, "manage.py", *args],
        cwd=cwd or Path(__file__).resolve().parent.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


HANG_GUARD_SECONDS = 600.0
"""Not a start-up budget: only what ends a wait on a server that neither answers nor exits (a hung process).
A slow start on a busy machine is waited for; a server that fails exits, and its log is shown at once."""


def wait_ready(process: subprocess.Popen[Any], base: str, log_path: Path, *, path: str = "/readyz") -> None:
    """Wait until the server at ``base`` says it is ready (``path`` answers 200: ``/readyz``, its database
    answers), for as long as its process lives: fail with its log the moment it exits. No start-up clock: a
    busy machine starts it later, not never (:data:`HANG_GUARD_SECONDS` ends only a hang)."""
    deadline = time.monotonic() + HANG_GUARD_SECONDS
    while True:
        assert process.poll() is None, f"the server exited with {process.returncode}:\n" + _tail(log_path)
        try:
            with urllib.request.urlopen(f"{base}{path}", timeout=5) as response:  # noqa: S310
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass  # not listening yet, or a worker still loading (the request waits in the backlog)
        assert time.monotonic() < deadline, f"{base} neither answered {path} nor exited:\n" + _tail(log_path)
        time.sleep(0.1)


def _tail(log_path: Path) -> str:
    return log_path.read_text(errors="replace")[-3000:] if log_path.exists() else "(no log)"


def url_of_the_test_database() -> str:
    """A DATABASE_URL naming the test database as pytest-django set it up (its name is not the settings' one),
    for a subprocess that must see what a ``transactional_db`` test committed. On the embedded server the host
    is its socket directory, given as the ``host`` query parameter."""
    from django.db import connection

    db = connection.settings_dict
    password = f":{quote(db['PASSWORD'], safe='')}" if db["PASSWORD"] else ""
    user = quote(db["USER"], safe="")
    if db["HOST"].startswith("/"):
        host, query = "", f"?host={quote(db['HOST'])}"
    else:
        host, query = db["HOST"], ""
    return f"postgres://{user}{password}@{host}:{db['PORT'] or 5432}/{db['NAME']}{query}"


def internal_id(public: str | int, kind: str = "entry") -> int:
    """The row id that a door's public id names (``memoryplatform.publicids``), for a test that reads the row
    through the ORM or gives it to a scripted model that sees row ids."""
    from memoryplatform import publicids

    internal = publicids.parse(kind, public)  # type: ignore[arg-type]  # a Kind's name, checked by parse's lookup
    assert internal is not None and int(public) >= publicids.PUBLIC_BASE, public
    return internal


def public_id(pk: int, kind: str = "entry") -> str:
    """The id a door shows of the row ``pk`` (``memoryplatform.publicids``)."""
    from memoryplatform import publicids

    return str(publicids.to_public(kind, pk))  # type: ignore[arg-type]  # a Kind's name


@contextlib.contextmanager
def scheduler_process(log: Path, **environ: str) -> Iterator[subprocess.Popen[bytes]]:
    """``manage.py dream_scheduler`` on the test database (these variables over the environment), ready: it
    listens for the admin's "Run Dream now"; stopped on leaving."""
    from dream.scheduler import DREAM_LISTENER
    from memoryplatform import listen

    root = Path(__file__).resolve().parents[1]
    env = os.environ | {"DATABASE_URL": url_of_the_test_database(), "SECRET_KEY": "scheduler-test"} | environ
    argv = [sys.executable, "manage.py", "dream_scheduler", "--parent-pid", str(os.getpid())]
    with log.open("w") as out:
        process = subprocess.Popen(argv, cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT)  # noqa: S603
    try:
        deadline = time.monotonic() + 90
        while listen.listeners(DREAM_LISTENER) == 0:
            assert process.poll() is None, log.read_text()
            assert time.monotonic() < deadline, f"the scheduler did not listen in 90 s:\n{log.read_text()}"
            time.sleep(0.1)
        yield process
    finally:
        process.terminate()
        process.wait(timeout=30)
