"""``manage.py check`` on the settings a transaction-pooling PgBouncer needs (``DATABASE_POOLER``): prepared
statements off (off by default there), a direct ``DATABASE_LISTEN_URL`` for the key cache, and URLs that name
PostgreSQL. Each case is a fresh process, as the settings read the environment once."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

POOLED = {"DATABASE_URL": "postgres://app@pgbouncer:6432/memoryplatform", "DATABASE_POOLER": "pgbouncer"}
DIRECT = "postgres://app@postgres:5432/memoryplatform"


def _check(**variables: str) -> subprocess.CompletedProcess:
    env = {**os.environ, **variables}
    for name in ("PREPARED_STATEMENTS", "API_KEY_CACHE", "SILENCED_SYSTEM_CHECKS"):
        if name not in variables:
            env.pop(name, None)
    return subprocess.run(  # noqa: S603
        [sys.executable, "manage.py", "check"],
        cwd=Path(settings.BASE_DIR),
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("variables", "error_id"),
    [
        ({**POOLED, "DATABASE_LISTEN_URL": DIRECT}, None),  # prepared statements are off by default
        ({**POOLED, "DATABASE_LISTEN_URL": DIRECT, "PREPARED_STATEMENTS": "true"}, "memoryplatform.E020"),
        (
            {
                **POOLED,
                "DATABASE_LISTEN_URL": DIRECT,
                "PREPARED_STATEMENTS": "true",
                "SILENCED_SYSTEM_CHECKS": "memoryplatform.E020",
            },
            None,
        ),  # PgBouncer 1.21 or later that prepares
        (POOLED, "memoryplatform.E021"),
        ({**POOLED, "API_KEY_CACHE": "false"}, None),
        ({**POOLED, "DATABASE_POOLER": "odyssey", "DATABASE_LISTEN_URL": DIRECT}, "memoryplatform.E022"),
        ({"DATABASE_LISTEN_URL": "mysql://app@db/memoryplatform"}, "memoryplatform.E023"),
    ],
)
def test_the_pooler_settings_are_checked(variables, error_id):
    result = _check(**variables)
    if error_id is None:
        assert result.returncode == 0, result.stderr[-2000:]
    else:
        assert result.returncode != 0
        assert error_id in result.stderr, result.stderr[-2000:]
