"""Restarts of the embedded PostgreSQL (issue 17): shared by every process, stopped after the last one
exits, recovered after ``kill -9`` of the server or of its watchdog, with the data intact and no stale lock or
process left.

Every "user" is a separate Python process, as the management commands, the web workers and Celery are. It uses
a DATA_DIR of its own, so it never touches the server the suite itself runs on.
"""

import fcntl
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from memoryplatform.embedded_db import server

USER = """
import sys
from pathlib import Path

import psycopg

from memoryplatform.embedded_db import server

data_dir = Path(sys.argv[1])
server.ensure_running(data_dir)
params = server.connection_settings(data_dir)
with psycopg.connect(
    host=params["HOST"], port=params["PORT"], user=params["USER"], dbname=params["NAME"], autocommit=True
) as conn:
    for statement in sys.argv[2:]:
        cursor = conn.execute(statement)
        if cursor.description:
            print(",".join(str(row[0]) for row in cursor.fetchall()))
print("ready", flush=True)
sys.stdin.read()  # lives until the test closes its stdin
"""

WAIT_SECONDS = 30


class User:
    """A process using the embedded server in DATA_DIR until stopped."""

    def __init__(self, data_dir: Path, *statements: str) -> None:
        self.process = subprocess.Popen(  # noqa: S603
            [sys.executable, "-c", USER, str(data_dir), *statements],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.output: list[str] = []
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.strip() == "ready":
                break
            self.output.append(line.strip())
        else:
            pytest.fail(f"the user process could not use the server (exit {self.process.wait()})")

    def stop(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        assert self.process.wait(timeout=WAIT_SECONDS) == 0


def postmaster_pid(data_dir: Path) -> int:
    return int((server.cluster_dir(data_dir) / "postmaster.pid").read_text().split("\n", 1)[0])


def running(pid: int) -> bool:
    """True while the process exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def processes_using(data_dir: Path, *, running_module: str = "") -> list[int]:
    """Every process whose command line names DATA_DIR (users, the watchdog and postgres do)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            named = str(data_dir).encode() in cmdline and running_module.encode() in cmdline
            if named and running(int(entry.name)):
                pids.append(int(entry.name))
    return pids


def wait_until(condition, what: str) -> None:  # noqa: ANN001
    deadline = time.monotonic() + WAIT_SECONDS
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"still waiting after {WAIT_SECONDS} s for {what}")
        time.sleep(0.1)


def lock_is_free(path: Path) -> bool:
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)
    return True


def assert_all_stopped(data_dir: Path, pid: int) -> None:
    wait_until(lambda: not running(pid), f"postgres (pid {pid}) to stop after its last user")
    wait_until(lambda: not processes_using(data_dir), "the watchdog to exit")
    # Not stale: free once every process that held them is gone (bounded, like the waits above).
    wait_until(lambda: lock_is_free(data_dir / "pg.users"), "the users' lock to be free")
    wait_until(lambda: lock_is_free(data_dir / "pg.watchdog"), "the watchdog's lock to be free")


@pytest.fixture
def data_dir() -> Iterator[Path]:
    # Not under pytest's tmp_path: when the suite runs as root the server runs as a system user, which must be
    # able to reach the directory (pytest's base temp dir is private to the user running the suite).
    base = Path(tempfile.mkdtemp(prefix="mp-pg-test-"))
    base.chmod(0o755)
    try:
        yield base / "data"
    finally:
        for pid in processes_using(base):
            os.kill(pid, signal.SIGKILL)
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process states from /proc (Linux)")
def test_shared_by_every_process_stopped_after_the_last_and_recovered_after_kill_9(data_dir: Path) -> None:
    first = User(data_dir, "CREATE TABLE kept (v text)", "INSERT INTO kept VALUES ('intact')")
    pid = postmaster_pid(data_dir)
    second = User(data_dir, "SELECT v FROM kept")
    assert second.output == ["intact"]
    assert postmaster_pid(data_dir) == pid  # one server, shared

    first.stop()
    time.sleep(3 * server.POLL_SECONDS)  # the watchdog has looked for users since
    assert running(pid)
    third = User(data_dir, "SELECT v FROM kept")
    assert third.output == ["intact"]
    assert postmaster_pid(data_dir) == pid  # survived the first user's exit

    second.stop()
    third.stop()
    assert_all_stopped(data_dir, pid)

    # kill -9 of the server while a process uses it: the next start recovers, the data intact.
    fourth = User(data_dir)
    killed = postmaster_pid(data_dir)
    assert killed != pid
    os.kill(killed, signal.SIGKILL)
    wait_until(lambda: not running(killed), "the killed postgres to be gone")
    fourth.stop()
    fifth = User(data_dir, "SELECT v FROM kept")
    assert fifth.output == ["intact"]
    restarted = postmaster_pid(data_dir)
    assert restarted != killed
    fifth.stop()
    assert_all_stopped(data_dir, restarted)

    # kill -9 of the watchdog: the next process adopts the running server, still stopped after the last user.
    sixth = User(data_dir)
    adopted = postmaster_pid(data_dir)
    (watchdog,) = processes_using(data_dir, running_module="memoryplatform.embedded_db.server")
    os.kill(watchdog, signal.SIGKILL)
    wait_until(lambda: not running(watchdog), "the killed watchdog to be gone")
    seventh = User(data_dir, "SELECT v FROM kept")
    assert seventh.output == ["intact"]
    assert postmaster_pid(data_dir) == adopted
    sixth.stop()
    seventh.stop()
    assert_all_stopped(data_dir, adopted)


@pytest.mark.skipif(os.geteuid() != 0, reason="only root runs the server as a system user")
def test_as_root_a_data_dir_under_a_private_directory_works(data_dir: Path) -> None:
    """A checkout under /root (mode 0700): the server's system user is given search permission (o+x) on the
    way to its data, not read permission, and the server starts."""
    private = data_dir.parent / "private"
    private.mkdir(mode=0o700)
    private.chmod(0o700)
    inside = private / "data"
    user = User(inside, "SELECT 'started'")
    assert user.output == ["started"]
    assert private.stat().st_mode & 0o777 == 0o701
    pid = postmaster_pid(inside)
    user.stop()
    assert_all_stopped(inside, pid)
