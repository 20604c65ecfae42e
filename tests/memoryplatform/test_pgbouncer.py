"""Behind a real PgBouncer in transaction mode (Debian's ``pgbouncer``): two ``manage.py serve`` processes
reach the test database through it (``DATABASE_POOLER=pgbouncer``) and LISTEN past it
(``DATABASE_LISTEN_URL``, direct). A key revoked through one process is refused by the other on its very next
request, though that process kept the key; so is a policy change made by a third process.

Skips without the ``pgbouncer`` binary, unless ``REQUIRE_PGBOUNCER`` is set (CI sets it: there it must run).
"""

import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from tests import pgbouncer
from tests.helpers import free_port, manage, stop_process_group, url_of_the_test_database, wait_ready

BASE_DIR = Path(settings.BASE_DIR)
ME = "/v1/agents/me"

PROVISION = """
import json
from apikeys.services import agent_create, apikey_create
from usermemory.models import AgentMemoryPolicy
agent_create(agent_id="agent-p")
AgentMemoryPolicy.objects.create(agent_id="agent-p", max_writes_per_turn=5)
agent_key, agent_raw = apikey_create(role="agent", agent_id="agent-p")
keys = {"admin": apikey_create(role="admin")[1], "agent": agent_raw, "agent_prefix": agent_key.prefix}
print("KEYS=" + json.dumps(keys))
"""
TIGHTEN_POLICY = """
from usermemory.models import AgentMemoryPolicy
AgentMemoryPolicy.objects.filter(agent_id="agent-p").update(max_writes_per_turn=1)
"""


@pytest.fixture
def bouncer(transactional_db) -> Iterator[pgbouncer.Bouncer]:
    if not pgbouncer.available():
        if os.environ.get("REQUIRE_PGBOUNCER"):
            pytest.fail(
                f"REQUIRE_PGBOUNCER is set but {pgbouncer.PGBOUNCER} is missing (apt-get install pgbouncer)"
            )
        pytest.skip("needs pgbouncer (apt-get install pgbouncer)")
    db = connection.settings_dict
    with pgbouncer.pgbouncer(host=db["HOST"], port=db["PORT"], user=db["USER"], password=db["PASSWORD"]) as b:
        yield b


@dataclass
class Server:
    base: str
    metrics_dir: Path

    def call(self, method: str, path: str, key: str, body: object = None, **headers: str) -> int:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(  # noqa: S310
            self.base + path,
            data=data,
            method=method,
            headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json", **headers},
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
                return response.status
        except urllib.error.HTTPError as exc:
            return exc.code

    def cache_hits(self) -> float:
        """``api_key_lookups_total{source="cache"}`` from the server's /metrics (loopback may read it)."""
        with urllib.request.urlopen(self.base + "/metrics", timeout=10) as response:  # noqa: S310
            text = response.read().decode()
        found = re.search(r'^api_key_lookups_total\{source="cache"\} (\S+)$', text, re.MULTILINE)
        return float(found.group(1)) if found else 0.0


def _env(bouncer: pgbouncer.Bouncer, tmp: Path) -> dict[str, str]:
    env = {
        **os.environ,
        "SECRET_KEY": settings.SECRET_KEY,
        "DEBUG": "false",
        "DATABASE_URL": bouncer.url(connection.settings_dict["NAME"]),
        "DATABASE_POOLER": "pgbouncer",
        "DATABASE_LISTEN_URL": url_of_the_test_database(),
        "PROMETHEUS_MULTIPROC_DIR": str(tmp),
    }
    for name in ("PREPARED_STATEMENTS", "API_KEY_CACHE", "MEMORYPLATFORM_API_KEY"):
        env.pop(name, None)
    tmp.mkdir(parents=True, exist_ok=True)
    return env


@pytest.fixture
def servers(bouncer, tmp_path) -> Iterator[tuple[Server, Server, dict[str, str], dict[str, str]]]:
    """Processes A and B, one worker each, both through PgBouncer; the keys; a third process's env."""
    shell_env = _env(bouncer, tmp_path / "shell")
    output = manage(shell_env, "shell", "--no-imports", "-c", PROVISION)
    keys = json.loads(next(line for line in output.splitlines() if line.startswith("KEYS="))[5:])
    started: list[subprocess.Popen] = []
    running: list[Server] = []
    try:
        for name in ("a", "b"):
            port = free_port()
            argv = ["manage.py", "serve", "--port", str(port), "--workers", "1", "--no-background"]
            with (tmp_path / f"serve-{name}.log").open("w") as log:
                process = subprocess.Popen(  # noqa: S603
                    [sys.executable, *argv],
                    cwd=BASE_DIR,
                    env=_env(bouncer, tmp_path / f"metrics-{name}"),
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            started.append(process)
            wait_ready(process, f"http://127.0.0.1:{port}", tmp_path / f"serve-{name}.log")
            running.append(Server(f"http://127.0.0.1:{port}", tmp_path / f"metrics-{name}"))
        yield running[0], running[1], keys, shell_env
    finally:
        for process in started:
            stop_process_group(process)


def _kept(server: Server, key: str) -> None:
    """Requests through ``server`` until one is answered from its cache (the listener connects in the
    background: until then every request looks its key up)."""
    deadline = time.monotonic() + 20
    before = server.cache_hits()
    while server.cache_hits() == before:
        assert server.call("GET", ME, key) == 200
        assert time.monotonic() < deadline, "process B never answered from its key cache"
        time.sleep(0.05)


def test_a_key_revoked_through_one_process_is_refused_by_the_other_at_once(servers):
    a, b, keys, _ = servers
    _kept(b, keys["agent"])
    assert a.call("DELETE", f"/v1/keys/{keys['agent_prefix']}", keys["admin"]) == 204
    assert b.call("GET", ME, keys["agent"]) == 401
    assert a.call("GET", ME, keys["agent"]) == 401


def test_a_policy_change_by_another_process_holds_on_the_next_write(servers):
    a, b, keys, shell_env = servers
    write = {"userId": "u1", "key": "k1", "value": "v", "visibility": "self"}
    memories = "/usermemorystore/memories"
    assert b.call("PUT", memories, keys["agent"], write, **{"X-Turn-Id": "t1"}) == 201
    _kept(b, keys["agent"])
    manage(shell_env, "shell", "--no-imports", "-c", TIGHTEN_POLICY)  # a third process, through PgBouncer
    assert b.call("PUT", memories, keys["agent"], {**write, "key": "k2"}, **{"X-Turn-Id": "t1"}) == 429
    assert a.call("PUT", memories, keys["agent"], {**write, "key": "k3"}, **{"X-Turn-Id": "t1"}) == 429
