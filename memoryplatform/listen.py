"""LISTEN on a direct connection to PostgreSQL, outside any connection pooler.

A transaction-pooling PgBouncer gives each transaction whichever server connection is free, so a LISTEN sent
through it registers on a server session that other clients then use, and its notifications reach nobody in
particular. A listener needs a session of its own: ``DATABASE_LISTEN_URL`` names PostgreSQL directly, past the
pooler. Unset, the default database's own settings are used (no pooler: the same server, the embedded one
included).

The API, for any component that waits for a NOTIFY:

- :func:`connect`: a direct autocommit connection.
- :func:`listening`: a context manager, a direct connection that LISTENs on the given channels.
- :func:`notifications`: the notifications received within a timeout, from the first that arrives to every
  one already received with it.
- :class:`Listener`: one daemon thread that keeps a listening connection open, reconnects when it drops,
  and says so (``on_reset``); :meth:`Listener.poll` takes, from any thread and without waiting, what the
  server already sent.

Only psycopg's public API: ``Connection.notifies(timeout=..., stop_after=...)`` (psycopg 3.2 or later, which
keeps the notifications that arrive while a statement runs for the next call) and ``Connection.fileno()``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import psycopg
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS
from psycopg import sql

from memoryplatform.logsafe import safe_traceback

logger = logging.getLogger(__name__)

# libpq's TCP keepalives: a listener whose server vanished without a word is known dead in about a minute
# (a Unix socket ignores them). The Listener's heartbeat does the same through any proxy.
KEEPALIVES: dict[str, Any] = {
    "keepalives": 1,
    "keepalives_idle": 30,
    "keepalives_interval": 10,
    "keepalives_count": 3,
}
APPLICATION_NAME = "memoryplatform-listen"
# Django's and psycopg's options that are not libpq connection parameters.
NOT_LIBPQ = {
    "prepare_threshold",
    "server_side_binding",
    "isolation_level",
    "pool",
    "assume_role",
    "cursor_factory",
}


def _default_params() -> dict[str, Any]:
    """libpq parameters of the default database's settings, starting the embedded server if it is the one."""
    db = settings.DATABASES[DEFAULT_DB_ALIAS]
    if db["ENGINE"] == "memoryplatform.embedded_db":
        from memoryplatform.embedded_db import server

        server.ensure_running(Path(settings.DATA_DIR))
    params = {key: value for key, value in db.get("OPTIONS", {}).items() if key not in NOT_LIBPQ}
    given = {"dbname": db["NAME"], "user": db["USER"], "password": db["PASSWORD"]}
    given |= {"host": db["HOST"], "port": db["PORT"]}
    return params | {key: value for key, value in given.items() if value}


def connect(*, name: str = APPLICATION_NAME) -> psycopg.Connection[Any]:
    """A direct autocommit connection: ``DATABASE_LISTEN_URL``, else the default database's settings.
    ``name`` is its application_name (pg_stat_activity shows who listens)."""
    url: str = settings.DATABASE_LISTEN_URL
    params = {} if url else _default_params()
    return psycopg.connect(
        url, autocommit=True, application_name=name, connect_timeout=10, **KEEPALIVES, **params
    )


@contextlib.contextmanager
def listening(*channels: str, name: str = APPLICATION_NAME) -> Iterator[psycopg.Connection[Any]]:
    """A direct connection (:func:`connect`) that LISTENs on ``channels``; closed at the end of the block."""
    with connect(name=name) as conn:
        for channel in channels:
            conn.execute(sql.SQL("LISTEN {channel}").format(channel=sql.Identifier(channel)))
        yield conn


def notifications(conn: psycopg.Connection[Any], *, timeout: float) -> list[psycopg.Notify]:
    """Wait at most ``timeout`` seconds for a notification on ``conn``; return it with every other one already
    received (an empty list when none came). ``timeout=0`` takes what arrived without waiting."""
    received = list(conn.notifies(timeout=timeout, stop_after=1))
    if received:
        received += conn.notifies(timeout=0)
    return received


class Listener:
    """One daemon thread per process holding a direct connection that LISTENs on ``channels`` (its
    application_name ``name``).

    ``on_notify`` runs for every notification; ``on_reset`` whenever what was missed is unknown: when the
    connection has just opened (after its LISTEN) and when it drops. Both run under the listener's lock,
    from the thread or from :meth:`poll`, so that a caller of :meth:`poll` sees their effect. While
    disconnected the thread retries every ``retry_seconds``; while connected and idle it sends a heartbeat
    every ``heartbeat_seconds``, so that a dead connection is noticed.
    """

    def __init__(
        self,
        channels: Iterable[str],
        *,
        on_notify: Callable[[psycopg.Notify], None],
        on_reset: Callable[[], None],
        name: str = APPLICATION_NAME,
        retry_seconds: float = 1.0,
        heartbeat_seconds: float = 10.0,
    ) -> None:
        self.channels, self.name = tuple(channels), name
        self.on_notify, self.on_reset = on_notify, on_reset
        self.retry_seconds, self.heartbeat_seconds = retry_seconds, heartbeat_seconds
        self._forget_parent()
        os.register_at_fork(after_in_child=self._forget_parent)

    def _forget_parent(self) -> None:
        """A new process (or object): no thread, no connection. A forked child leaves its parent's connection
        alone (closing it would end the parent's session) and, at its first :meth:`start`, opens its own."""
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self._lock = threading.Lock()
        self._conn: psycopg.Connection[Any] | None = None
        self._stop = threading.Event()

    def start(self) -> None:
        """Start the thread unless it runs (cheap: called before each use)."""
        if self._thread is not None:
            return
        with self._start_lock:
            if self._thread is None:
                thread = threading.Thread(target=self._run, name="memoryplatform-listen", daemon=True)
                thread.start()
                self._thread = thread

    def stop(self, *, timeout: float | None = None) -> None:
        """End the thread and close its connection (within a heartbeat); wait for it at most ``timeout``.
        A stopped listener stays stopped."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    @property
    def connected(self) -> bool:
        return self._conn is not None

    def poll(self) -> bool:
        """Apply what the server already sent, without waiting; ``False`` while not connected (nothing can
        be known to be current). The lock makes a drain in progress on the thread finish first."""
        with self._lock:
            conn = self._conn
            if conn is None:
                return False
            try:
                readable, _, _ = select.select([conn.fileno()], [], [], 0)
                if readable:
                    self._drain(conn)
            except (psycopg.Error, OSError, ValueError):
                self._drop()
                return False
            return True

    def _drain(self, conn: psycopg.Connection[Any]) -> None:
        for notify in conn.notifies(timeout=0):
            self.on_notify(notify)

    def _drop(self) -> None:
        """Under the lock: the connection is no longer trusted (the thread closes it and reconnects)."""
        if self._conn is not None:
            self._conn = None
            self.on_reset()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                with listening(*self.channels, name=self.name) as conn:
                    with self._lock:
                        self._conn = conn
                        self.on_reset()  # changes made before the LISTEN were not heard
                    self._serve(conn)
            except (psycopg.Error, OSError, ValueError) as exc:
                logger.warning("LISTEN connection lost or refused (%s); retrying", str(exc).strip() or exc)
            except Exception as exc:  # e.g. the embedded server failing to start: keep trying, never die
                logger.error("LISTEN connection failed; retrying\n%s", safe_traceback(exc))
            finally:
                with self._lock:
                    self._drop()
            self._stop.wait(self.retry_seconds)

    def _serve(self, conn: psycopg.Connection[Any]) -> None:
        """Wait on the socket; drain under the lock; send a heartbeat when idle. Returns on a stop; raises
        when the connection breaks (including a :meth:`poll` that found it broken)."""
        while not self._stop.is_set():
            readable, _, _ = select.select([conn.fileno()], [], [], self.heartbeat_seconds)
            with self._lock:
                if self._conn is not conn:
                    raise psycopg.OperationalError("the listening connection was found broken")
                if not readable:
                    conn.execute("SELECT 1")  # notifications arriving meanwhile are kept, drained next
                self._drain(conn)
