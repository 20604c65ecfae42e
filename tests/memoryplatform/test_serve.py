"""``manage.py serve``, the real server in a subprocess: a port in use is refused before anything starts, and
no open stream or slow client stalls it (issue 16).

The server runs against the test database (pytest-django's, whose name is not the settings' one), named by a
DATABASE_URL made of the test connection's settings; the test's data is committed (``transactional_db``), so
the server's processes see it.
"""

import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest
from django.conf import settings

from tests.helpers import stop_process_group, url_of_the_test_database, wait_ready

BASE_DIR = Path(settings.BASE_DIR)
PYTHON = sys.executable
HANG_GUARD = 180  # seconds: ends only a hang, never a slow start
STREAMS = 16
SLOW_POSTS = 16

PROVISION = """
import json
from apikeys.services import agent_create, apikey_create
agent_create(agent_id="agent-s")
keys = {
    "viewer": apikey_create(role="viewer")[1],
    "agent": apikey_create(role="agent", agent_id="agent-s")[1],
}
print("KEYS=" + json.dumps(keys))
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _server_env(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "prometheus").mkdir(exist_ok=True)
    env = {
        **os.environ,
        "SECRET_KEY": settings.SECRET_KEY,
        "DEBUG": "false",
        "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "prometheus"),  # not the checkout's var/prometheus
    }
    return env


def _manage(env: dict[str, str], *args: str) -> str:
    result = subprocess.run(  # noqa: S603
        [PYTHON, "manage.py", *args], cwd=BASE_DIR, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def test_serve_refuses_a_port_in_use(db, tmp_path):
    env = {**_server_env(tmp_path), "DATABASE_URL": url_of_the_test_database()}  # the port comes first
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(  # noqa: S603
            [PYTHON, "manage.py", "serve", "--port", str(port), "--no-background"],
            cwd=BASE_DIR,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode != 0
    assert f"Port {port} on 127.0.0.1 is already in use" in result.stderr
    assert "Serving on" not in result.stdout


@dataclass
class Live:
    base: str
    port: int
    keys: dict[str, str]
    process: subprocess.Popen[bytes]
    log_path: Path


@pytest.fixture
def live(transactional_db, tmp_path) -> Iterator[Live]:
    """``manage.py serve`` with 2 workers (as ``make run``) on a free port; an agent key and a viewer key."""
    env = _server_env(tmp_path)
    env["DATABASE_URL"] = url_of_the_test_database()
    output = _manage(env, "shell", "--no-imports", "-c", PROVISION)
    keys = json.loads(next(line for line in output.splitlines() if line.startswith("KEYS="))[5:])
    port = _free_port()
    log_path = tmp_path / "serve.log"
    server = _serve(env, port, log_path, workers=2)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_ready(server, base, log_path)
        yield Live(base=base, port=port, keys=keys, process=server, log_path=log_path)
    finally:
        stop_process_group(server)


NO_SCHEDULER = "--no-background"


def _serve(env: dict[str, str], port: int, log_path: Path, *, workers: int) -> subprocess.Popen[bytes]:
    with log_path.open("w") as log:
        return subprocess.Popen(  # noqa: S603
            [
                PYTHON,
                "manage.py",
                "serve",
                "--port",
                str(port),
                "--workers",
                str(workers),
                "--no-background",
            ],
            cwd=BASE_DIR,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: the workers are stopped with it
        )


def _open(live: Live, head: str, body: bytes = b"") -> socket.socket:
    """A raw connection that sends ``head`` (and ``body``) and then holds, sending nothing more."""
    sock = socket.create_connection(("127.0.0.1", live.port), timeout=5)
    sock.sendall(head.encode("latin-1") + body)
    return sock


def _timed_get(url: str, key: str) -> tuple[float, int, bytes]:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"})  # noqa: S310
    started = time.perf_counter()
    with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
        body = response.read()
        return time.perf_counter() - started, response.status, body


def test_open_streams_and_slow_clients_do_not_stall_the_server(live: Live):
    """16 ``GET /mcp/`` streams (a viewer's key) and 16 slow POSTs stay open; ``/healthz`` and an agent's
    recall still answer, each in under 1 s (the one timing the issue asks a test to assert). The server is
    first fully started: the MCP app, which a worker loads once it answers, is in (issue 48)."""
    _mcp_listed(live)
    user = "stall-user"
    put = urllib.request.Request(  # noqa: S310
        f"{live.base}/usermemorystore/memories",
        data=json.dumps({"userId": user, "key": "color", "value": "blue"}).encode(),
        method="PUT",
        headers={"Authorization": f"Bearer {live.keys['agent']}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(put, timeout=10) as response:  # noqa: S310
        assert response.status == 201

    host = f"Host: 127.0.0.1:{live.port}\r\n"
    viewer = f"Authorization: Bearer {live.keys['viewer']}\r\n"
    agent = f"Authorization: Bearer {live.keys['agent']}\r\n"
    held: list[socket.socket] = []
    try:
        streams = [
            _open(live, f"GET /mcp/ HTTP/1.1\r\n{host}{viewer}Accept: text/event-stream\r\n\r\n")
            for _ in range(STREAMS)
        ]
        held += streams
        body = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "par'
        for i in range(SLOW_POSTS):
            if i % 4 == 3:  # headers that never end
                held.append(
                    _open(live, f"POST /mcp/ HTTP/1.1\r\n{host}{viewer}Content-Type: application/json\r\n")
                )
                continue
            path = "/mcp/" if i % 2 else "/usermemorystore/memories"
            method = "POST" if i % 2 else "PUT"
            head = (
                f"{method} {path} HTTP/1.1\r\n{host}{viewer if i % 2 else agent}"
                f"Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
                f"Content-Length: 100000\r\n\r\n"
            )
            held.append(_open(live, head, body))  # a body that stops after a few bytes
        time.sleep(0.5)  # let the server take every connection in

        for _ in range(3):
            elapsed, status, _ = _timed_get(f"{live.base}/healthz", live.keys["viewer"])
            assert status == 200 and elapsed < 1.0, elapsed
            elapsed, status, recalled = _timed_get(
                f"{live.base}/usermemorystore/memories/{user}/visible", live.keys["agent"]
            )
            assert status == 200 and elapsed < 1.0, elapsed
            assert [entry["key"] for entry in json.loads(recalled)] == ["color"]

        for stream in streams:  # no stream was opened: each GET got its answer, a 405
            assert stream.recv(64).startswith(b"HTTP/1.1 405")
    finally:
        for sock in held:
            sock.close()


def test_make_run_checks_the_port_before_anything_else():
    """``make run`` checks the port before it prints the admin's URL and key (bootstrap) or serves."""
    result = subprocess.run(  # noqa: S603
        ["make", "-n", "run"],
        cwd=BASE_DIR,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,  # noqa: S607
    )
    lines = [line for line in result.stdout.splitlines() if "manage.py" in line]
    assert "serve" in lines[-1] and "--check-port" not in lines[-1]
    check = next(i for i, line in enumerate(lines) if "--check-port" in line)
    assert check < next(i for i, line in enumerate(lines) if "bootstrap" in line)


def test_make_run_says_each_step_before_it_runs_it():
    """On a fresh clone (-B: every target out of date) ``make run`` prints one line per step, in order."""
    result = subprocess.run(  # noqa: S603
        ["make", "-n", "-B", "run"],  # noqa: S607
        cwd=BASE_DIR,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    # a step that runs only when needed (the .env's keys) says so inside its shell condition
    steps = [step for line in result.stdout.splitlines() for step in re.findall(r'echo "(==> [^"]*)"', line)]
    assert [step.split()[1] for step in steps] == [
        "Creating",
        "Installing",
        "Adding",
        "Migrating",
        "Checking",
        "Collecting",
        "Making",
    ]
    # Its step's line says what it does; pip shows each package it fetches (a first install takes minutes,
    # never silent), without progress bars; migrate prints nothing more.
    installs = [line for line in result.stdout.splitlines() if "pip install" in line and " -e " in line]
    assert installs and all("--progress-bar off" in line and "--quiet" not in line for line in installs)
    assert "migrate --noinput --verbosity 0" in result.stdout


def _chunked_put(live: Live, body: bytes) -> tuple[int, dict]:
    """A PUT upsert whose body comes chunked (no Content-Length), in 64 KB chunks."""
    conn = http.client.HTTPConnection("127.0.0.1", live.port, timeout=30)
    try:
        chunks = (body[i : i + 65536] for i in range(0, len(body), 65536))
        headers = {"Authorization": f"Bearer {live.keys['agent']}", "Content-Type": "application/json"}
        conn.request("PUT", "/usermemorystore/memories", body=chunks, headers=headers, encode_chunked=True)
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


def test_chunked_bodies_are_read_and_limited(live: Live):
    """A chunked body reaches the API whole (not as an empty body), and one over the 1 MB limit is a 413."""
    status, created = _chunked_put(live, json.dumps({"userId": "chunked", "key": "k", "value": "v"}).encode())
    assert status == 201, created
    assert created["key"] == "k" and created["value"] == "v"

    big = json.dumps({"userId": "chunked", "key": "big", "value": "x" * (2 * 1024 * 1024)}).encode()
    status, refused = _chunked_put(live, big)
    assert status == 413
    assert refused == {"error": "Request body is too large.", "code": "payload_too_large", "details": {}}


def _mcp_listed(live: Live) -> None:
    """A few MCP ``tools/list`` calls, each on a new connection (both workers take some): the MCP app, which a
    worker loads once it has started, is loaded and answers."""
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}).encode()
    headers = {
        "Authorization": f"Bearer {live.keys['viewer']}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-11-25",
    }
    for _ in range(4):
        request = urllib.request.Request(f"{live.base}/mcp/", data=body, headers=headers, method="POST")
        with urllib.request.urlopen(request, timeout=60) as answer:  # noqa: S310
            assert answer.status == 200


def test_a_stop_ends_every_worker_cleanly(live: Live):
    """SIGTERM to the server's process group (as ``docker stop`` or systemd send it), once both workers have
    served REST and MCP: each runs its lifespan's end (the MCP app's session manager stopped), the bridge's
    idle threads do not hold a worker up, and the server exits 0, nothing killed."""
    _mcp_listed(live)
    os.killpg(live.process.pid, signal.SIGTERM)
    assert live.process.wait(timeout=60) == 0, live.log_path.read_text()[-3000:]
    log = live.log_path.read_text()
    assert log.count("Application shutdown complete.") == 2, log[-3000:]


def _descendants(pid: int) -> list[int]:
    return [child.pid for child in psutil.Process(pid).children(recursive=True)]


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_serve_runs_a_worker_and_beat_and_ctrl_c_leaves_nothing(transactional_db, tmp_path):
    """``make run`` (``serve``): once the web answers, a Celery worker and beat start beside it; SIGINT to
    ``serve`` alone (as a terminal's Ctrl-C reaches it) stops every process it started, pools included."""
    env = _server_env(tmp_path) | {"DATABASE_URL": url_of_the_test_database(), "REDIS_URL": ""}
    port = _free_port()
    log_path = tmp_path / "serve.log"
    with log_path.open("w") as log:
        server = subprocess.Popen(  # noqa: S603
            [PYTHON, "manage.py", "serve", "--port", str(port), "--workers", "1"],
            cwd=BASE_DIR,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # the test's own Ctrl-C reaches none of them
        )
    try:
        wait_ready(server, f"http://127.0.0.1:{port}", log_path)
        deadline = time.monotonic() + HANG_GUARD
        while not ("celery@" in log_path.read_text() and "beat: Starting" in log_path.read_text()):
            assert server.poll() is None, log_path.read_text()[-3000:]
            assert time.monotonic() < deadline, log_path.read_text()[-3000:]
            time.sleep(0.2)
        started = _descendants(server.pid)
        commands = [" ".join(psutil.Process(pid).cmdline()) for pid in started]
        assert any("celery -A config worker" in c for c in commands), commands
        assert any("celery -A config beat" in c for c in commands), commands
        assert any("uvicorn" in c for c in commands), commands

        server.send_signal(signal.SIGINT)
        assert server.wait(timeout=60) == 0, log_path.read_text()[-3000:]
        assert [pid for pid in started if _alive(pid)] == []
    finally:
        stop_process_group(server)


HEALTHZ_COUNT = re.compile(
    r'^django_http_requests_latency_seconds_by_view_method_count\{method="GET",view="healthz"\} (\S+)$', re.M
)


def _healthz_counted(base: str) -> float | None:
    """How many ``/healthz`` requests the server's /metrics counts (None: no such series)."""
    with urllib.request.urlopen(f"{base}/metrics", timeout=30) as response:  # noqa: S310
        found = HEALTHZ_COUNT.search(response.read().decode())
    return float(found[1]) if found else None


def test_a_second_server_on_the_same_data_dir_keeps_the_first_ones_metrics(transactional_db, tmp_path):
    """Issue 53, finding 9: a second ``manage.py serve`` on the same DATA_DIR emptied DATA_DIR/prometheus, so
    the running server's /metrics lost the series its workers had counted. Now it joins the directory as it
    is, and says so; the first server's series stay (the second one only asks /readyz)."""
    env = {k: v for k, v in _server_env(tmp_path).items() if k != "PROMETHEUS_MULTIPROC_DIR"}
    env |= {"DATA_DIR": str(tmp_path / "data"), "DATABASE_URL": url_of_the_test_database()}
    servers = []
    try:
        first = f"http://127.0.0.1:{_free_port()}"
        servers.append(_serve(env, int(first.rsplit(":", 1)[1]), tmp_path / "first.log", workers=1))
        wait_ready(servers[0], first, tmp_path / "first.log")
        for _ in range(5):
            urllib.request.urlopen(f"{first}/healthz", timeout=30).close()  # noqa: S310
        assert _healthz_counted(first) == 5

        second = f"http://127.0.0.1:{_free_port()}"
        servers.append(_serve(env, int(second.rsplit(":", 1)[1]), tmp_path / "second.log", workers=1))
        wait_ready(servers[1], second, tmp_path / "second.log")

        assert _healthz_counted(first) == 5  # on main: None, the series gone with the files
        assert "Another server uses" in (tmp_path / "second.log").read_text()
        assert (tmp_path / "data" / "prometheus").is_dir()
    finally:
        for server in servers:
            stop_process_group(server)
