"""A real PgBouncer (Debian's ``pgbouncer``) in transaction mode in front of a PostgreSQL server, with a
directory and a port of its own: for the PgBouncer tests, ``.ci/behind-pgbouncer`` and ``bench/pooler.py``.

It listens on 127.0.0.1 only (no Unix socket), trusts its clients (any user named in its auth file, here the
server's user), and reaches the server as that user. PgBouncer refuses to run as root: then it runs as the
embedded server's system user, which may also enter that server's socket directory.
"""

import contextlib
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import psycopg

from memoryplatform.embedded_db.server import SYSTEM_USER
from tests.helpers import free_port, stop_process

PGBOUNCER = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
START_TIMEOUT_SECONDS = 20.0


def available() -> bool:
    return os.access(PGBOUNCER, os.X_OK)


@dataclass(frozen=True)
class Bouncer:
    port: int
    user: str

    def url(self, dbname: str) -> str:
        """A DATABASE_URL through PgBouncer (trust: no password)."""
        return f"postgres://{quote(self.user, safe='')}@127.0.0.1:{self.port}/{quote(dbname, safe='')}"


def _config(*, host: str, port: int, user: str, password: str, listen_port: int, workdir: Path) -> str:
    server = f"host={host} port={port} user={user}" + (f" password={password}" if password else "")
    return f"""[databases]
* = {server}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {listen_port}
unix_socket_dir =
auth_type = trust
auth_file = {workdir / "users.txt"}
pool_mode = transaction
admin_users = {user}
max_client_conn = 500
default_pool_size = 20
server_reset_query =
logfile = {workdir / "pgbouncer.log"}
pidfile =
"""


@contextlib.contextmanager
def pgbouncer(*, host: str, port: int | str, user: str, password: str = "") -> Iterator[Bouncer]:
    """Start PgBouncer in front of the server at ``host``:``port`` (a directory: its Unix socket) and stop it
    at the end of the block. Its files are in a new directory in the temp dir (which its user can enter)."""
    workdir = Path(tempfile.mkdtemp(prefix="mp-pgbouncer-"))
    listen_port = free_port()
    (workdir / "users.txt").write_text(f'"{user}" ""\n')
    ini = workdir / "pgbouncer.ini"
    ini.write_text(
        _config(
            host=host,
            port=int(port or 5432),
            user=user,
            password=password,
            listen_port=listen_port,
            workdir=workdir,
        )
    )
    switch_user: list[str] = []
    if os.geteuid() == 0:
        account = pwd.getpwnam(
            SYSTEM_USER
        )  # the embedded server created it: it may enter its socket directory
        for path in (workdir, *workdir.iterdir()):
            os.chown(path, account.pw_uid, account.pw_gid)
        switch_user = ["-u", SYSTEM_USER]
        workdir.chmod(0o755)
    process = subprocess.Popen(  # noqa: S603
        [PGBOUNCER, *switch_user, str(ini)], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT
    )
    bouncer = Bouncer(port=listen_port, user=user)
    try:
        _wait_accepting(bouncer, process, workdir)
        yield bouncer
    finally:
        stop_process(process)
        shutil.rmtree(workdir, ignore_errors=True)


def _wait_accepting(bouncer: Bouncer, process: "subprocess.Popen[bytes]", workdir: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while True:
        if process.poll() is not None:
            log = workdir / "pgbouncer.log"
            raise RuntimeError(f"pgbouncer exited: {log.read_text()[-2000:] if log.exists() else ''}")
        try:
            with psycopg.connect(bouncer.url("pgbouncer"), connect_timeout=2, autocommit=True) as conn:
                conn.execute("SHOW VERSION")
            return
        except psycopg.Error:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
