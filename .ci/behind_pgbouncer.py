"""Run pytest with DATABASE_URL through a real PgBouncer in transaction mode (Debian's pgbouncer, 1.18 here:
no prepared statements), in front of the embedded PostgreSQL of a new DATA_DIR (the machine's PostgreSQL has
no pgvector). DATABASE_POOLER=pgbouncer; DATABASE_LISTEN_URL goes straight to the server (tests/conftest.py
points it at the test database). pytest's arguments are this script's; pytest-django's --reuse-db keeps the
test database at the end (PgBouncer holds connections to it), and the DATA_DIR goes with it.

    .venv/bin/python .ci/behind_pgbouncer.py tests/apikeys tests/usermemory/test_api_flow.py
"""

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from urllib.parse import quote

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from memoryplatform.embedded_db.server import DB_NAME, connection_settings, ensure_running  # noqa: E402
from tests.pgbouncer import pgbouncer  # noqa: E402


def main(args: list[str]) -> int:
    data_dir = Path(tempfile.mkdtemp(prefix="mp-ci-pgbouncer-"))
    try:
        ensure_running(data_dir)  # this process uses the server until it exits
        server = connection_settings(data_dir)
        socket = quote(server["HOST"], safe="")
        direct = f"postgres://{server['USER']}@/{DB_NAME}?host={socket}&port={server['PORT']}"
        with pgbouncer(host=server["HOST"], port=server["PORT"], user=server["USER"]) as bouncer:
            env = os.environ | {
                "DATA_DIR": str(data_dir),
                "DATABASE_URL": bouncer.url(DB_NAME),
                "DATABASE_POOLER": "pgbouncer",
                "DATABASE_LISTEN_URL": direct,
            }
            env.pop("PREPARED_STATEMENTS", None)  # off by default behind the pooler
            command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--reuse-db", *args]
            print(f"pytest through pgbouncer on 127.0.0.1:{bouncer.port} (transaction mode)", flush=True)
            return subprocess.run(command, cwd=ROOT, env=env, check=False).returncode  # noqa: S603
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
