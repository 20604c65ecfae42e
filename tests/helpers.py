"""Shared test helpers: the error-envelope assertion, a server process group's end, the test database's URL
for subprocesses, and real Celery workers on it (a broker each).

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
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
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

SERVE_POLL_SECONDS = 0.01
"""How often a test's in-process HTTP server (``serve_forever``) looks whether it is asked to stop:
``shutdown()`` waits up to this. The standard library's 0.5 s cost each test that starts one a quarter of a
second on average (30 s of tests/extraction/test_api.py's 56 s alone)."""


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


QUEUES = ("default", "vectors", "dream", "extraction", "webhooks")


@dataclass(frozen=True)
class Broker:
    """A broker a real worker and this process share: its name, URL, and the worker's environment for it."""

    name: str
    url: str
    env: dict[str, str]

    @property
    def transport_options(self) -> dict[str, Any]:
        """This process's options: on PostgreSQL no pooled connection is kept (the test database is dropped at
        the end), on Redis the workers' short visibility timeout."""
        if self.name == "redis":
            return {"visibility_timeout": 5}
        from sqlalchemy.pool import NullPool

        return {"poolclass": NullPool}

    def purge(self) -> None:
        """Empty every queue (and, on Redis, the unacknowledged messages) that an earlier test left."""
        from kombu import Connection

        with Connection(self.url, transport_options=self.transport_options) as connection:
            for queue in QUEUES:
                connection.default_channel.queue_purge(queue)
        if self.name == "redis":
            import redis

            client = redis.Redis.from_url(self.url)
            client.delete("unacked", "unacked_index", "unacked_mutex")


def database_broker() -> Broker:
    """The embedded default's broker: kombu's SQLAlchemy transport on the test database, emptied."""
    from memoryplatform.broker import broker_url

    url = broker_url(redis_url="", database_url=url_of_the_test_database(), database={})
    broker = Broker("postgresql", url, {"REDIS_URL": ""})
    broker.purge()
    return broker


@contextlib.contextmanager
def publishing_to(broker: Broker) -> Iterator[None]:
    """This process enqueues into ``broker`` (the suite's default is its own memory): a write's nudge and the
    admin's button then reach the worker. A Celery app of the same settings on that broker is made the
    current and the default one, for every thread (a live server's, a nudge's timer): every
    ``@shared_task`` resolves to it; the project's app is again after."""
    from celery import Celery

    from config import celery_app

    app = Celery("memoryplatform-test", set_as_current=False)
    app.config_from_object("django.conf:settings", namespace="CELERY")
    app.conf.broker_url = broker.url
    app.conf.broker_transport_options = broker.transport_options
    app.set_default()
    app.set_current()
    try:
        yield
    finally:
        celery_app.set_default()
        celery_app.set_current()
        app.close()


@contextlib.contextmanager
def broker_that_hangs_up() -> Iterator[tuple[str, list[float]]]:
    """A Redis URL whose port takes each connection and closes it at once (a broker that is down, as its
    clients see it); yields it and the list of connections taken, one entry each, as they are taken."""
    taken: list[float] = []
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:  # shut down: the block ended
                return
            taken.append(time.monotonic())
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"redis://127.0.0.1:{listener.getsockname()[1]}/0", taken
    finally:
        listener.shutdown(socket.SHUT_RDWR)  # wakes the accept (a close alone does not, on Linux)
        thread.join(timeout=10)
        listener.close()


class Worker:
    """``celery -A config worker`` on the test database, in a process group of its own (so that a SIGKILL can
    end it whole, pool and all, as the kernel's OOM killer or a lost node would)."""

    def __init__(self, log: Path, broker: Broker, **environ: str) -> None:
        self.log = log
        root = Path(__file__).resolve().parents[1]
        env = os.environ | {"DATABASE_URL": url_of_the_test_database(), "SECRET_KEY": "worker-test"}
        env = env | {"BACKGROUND_NICE": "0", "CELERY_WORKER_CONCURRENCY": "2"} | broker.env | environ
        env.pop("CELERY_BROKER_URL", None)
        queues = ",".join(QUEUES)
        argv = [sys.executable, "-m", "celery", "-A", "config", "worker", "-Q", queues, "-l", "INFO"]
        with log.open("a") as out:
            self.process = subprocess.Popen(  # noqa: S603
                argv, cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        self.wait_for("ready.", seconds=120)

    def wait_for(self, text: str, *, seconds: float = 90, count: int = 1) -> None:
        """Wait until the worker's log says ``text`` (``count`` times)."""
        deadline = time.monotonic() + seconds
        while self.log.read_text(errors="replace").count(text) < count:
            assert self.process.poll() is None, f"the worker ended:\n{_tail(self.log)}"
            assert time.monotonic() < deadline, f"no {text!r} in {seconds:.0f} s:\n{_tail(self.log)}"
            time.sleep(0.1)

    def pool(self) -> list[int]:
        """The pool's processes (the worker's children)."""
        import psutil

        return [child.pid for child in psutil.Process(self.process.pid).children()]

    def kill(self) -> None:
        """SIGKILL the whole worker: its main process and its pool."""
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop(self) -> None:
        """A warm shutdown, as ``serve`` asks for one: SIGTERM to the main process alone, which ends its pool
        itself (a SIGTERM to the pool's processes too left the main process waiting on them, at times, until
        the SIGKILL); then SIGKILL to whatever of the group is left."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=30)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)


@contextlib.contextmanager
def celery_worker(log: Path, broker: Broker, **environ: str) -> Iterator[Worker]:
    """A real worker (:class:`Worker`), ready; stopped on leaving."""
    worker = Worker(log, broker, **environ)
    try:
        yield worker
    finally:
        worker.stop()
