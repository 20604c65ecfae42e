"""Serving, side by side in one run: the previous server (gunicorn's gthread workers serving
``config.wsgi``: 2 x 2 threads as ``make run`` had it, and 2 x 4) and the current one (uvicorn serving
``config.asgi``, 2 workers x 4 threads), all started by ``manage.py serve`` on the same database and
driven in alternating rounds.

    env -u DATABASE_URL .venv/bin/python -m bench.serving       # the embedded server's bench database
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench .venv/bin/python -m bench.serving

The database must have been filled by ``python -m bench.load`` first (``bench/target.py`` says which).
Measured: an agent's recall (``GET /usermemorystore/memories/{typical user}/visible``) and ``GET /healthz``,
each with ``--concurrency`` clients on kept-alive connections for ``--seconds`` per round; then the same
recall from one client while 16 ``GET /mcp/`` streams and 16 slow POSTs are held open.
"""

import argparse
import http.client
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from bench import target

ROOT = target.ROOT
SERVERS = {
    "gunicorn (WSGI, 2 workers x 2 threads)": ["--server", "gunicorn", "--workers", "2", "--threads", "2"],
    "gunicorn (WSGI, 2 workers x 4 threads)": ["--server", "gunicorn", "--workers", "2", "--threads", "4"],
    "uvicorn (ASGI, 2 workers x 4 threads)": ["--workers", "2", "--threads", "4"],
}


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Served:
    """One ``manage.py serve`` in its own process group, stopped with everything it started."""

    def __init__(self, name: str, args: list[str], env: dict[str, str], logfile: Path) -> None:
        self.name, self.port = name, free_port()
        cmd = [sys.executable, "manage.py", "serve", "--port", str(self.port), "--no-dream-scheduler", *args]
        with logfile.open("ab") as out:
            self.proc = subprocess.Popen(  # noqa: S603 (our own interpreter, fixed arguments)
                cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.time() + 60
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{name} exited with {self.proc.returncode}; see {logfile}")
            try:
                if request(self.port, "/healthz", None)[0] == 200:
                    log(f"{name} up on port {self.port}")
                    return
            except OSError:
                pass
            time.sleep(0.3)
        raise RuntimeError(f"{name} did not answer /healthz; see {logfile}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)


def request(port: int, path: str, key: str | None, timeout: float = 10) -> tuple[int, float]:
    """One GET on a new connection: (status, seconds)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    started = time.perf_counter()
    try:
        conn.request("GET", path, headers={"Authorization": f"Bearer {key}"} if key else {})
        response = conn.getresponse()
        response.read()
        return response.status, time.perf_counter() - started
    finally:
        conn.close()


def drive(port: int, path: str, key: str, clients: int, seconds: float) -> dict[str, float]:
    """``clients`` threads, each on one kept-alive connection, for ``seconds``: req/s and latencies."""
    latencies: list[float] = []
    errors = 0
    lock = threading.Lock()
    stop_at = time.perf_counter() + seconds

    def client() -> None:
        nonlocal errors
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        mine: list[float] = []
        failed = 0
        while time.perf_counter() < stop_at:
            started = time.perf_counter()
            try:
                conn.request("GET", path, headers={"Authorization": f"Bearer {key}"})
                response = conn.getresponse()
                response.read()
                if response.status != 200:
                    failed += 1
                mine.append(time.perf_counter() - started)
            except (http.client.HTTPException, OSError):
                failed += 1
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.close()
        with lock:
            latencies.extend(mine)
            errors += failed

    threads = [threading.Thread(target=client) for _ in range(clients)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    latencies.sort()
    return {
        "rps": len(latencies) / elapsed,
        "p50_ms": 1000 * latencies[len(latencies) // 2] if latencies else float("nan"),
        "p99_ms": 1000 * latencies[int(len(latencies) * 0.99)] if latencies else float("nan"),
        "errors": errors,
    }


def hold_clients(port: int, key: str) -> list[socket.socket]:
    """16 ``GET /mcp/`` streams and 16 slow POSTs (a body that stops after a few bytes), held open."""
    held = []
    host = f"Host: 127.0.0.1:{port}\r\nAuthorization: Bearer {key}\r\n"
    for i in range(32):
        sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        if i < 16:
            sock.sendall(f"GET /mcp/ HTTP/1.1\r\n{host}Accept: text/event-stream\r\n\r\n".encode())
        else:
            head = (
                f"POST /mcp/ HTTP/1.1\r\n{host}Content-Type: application/json\r\nContent-Length: 9999\r\n\r\n"
            )
            sock.sendall(head.encode() + b'{"jsonrpc": "2.0", ')
        held.append(sock)
    time.sleep(0.5)
    return held


def prepare(db: target.Target) -> tuple[str, str]:
    """An agent key of the bench agent, and the typical user (median number of entries)."""
    target.django_setup(db)
    from django.db.models import Count

    from apikeys.services import apikey_create
    from bench import data
    from usermemory.models import MemoryEntry

    _, raw_key = apikey_create(role="agent", agent_id=data.BENCH_AGENT, label="bench serving")
    sizes = list(
        MemoryEntry.objects.values("user_id")
        .annotate(n=Count("id"))
        .order_by("n", "user_id")
        .values_list("user_id")
    )
    return raw_key, sizes[len(sizes) // 2][0]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--db-url", default=os.environ.get("DATABASE_URL", ""))
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", help="write the results as JSON here")
    args = parser.parse_args()
    db = target.resolve(args.db_url)
    key, user = prepare(db)
    env = os.environ | {"DATABASE_URL": db.url, "DEBUG": "false"}
    env.pop("REDIS_URL", None)
    logfile = Path("/tmp/bench-serving.log")  # noqa: S108
    recall = f"/usermemorystore/memories/{user}/visible"
    results: dict[str, Any] = {name: {"recall": [], "healthz": []} for name in SERVERS}
    servers = [Served(name, extra, env, logfile) for name, extra in SERVERS.items()]
    try:
        for server in servers:  # warm-up: every worker, its connection pool and caches
            drive(server.port, recall, key, args.concurrency, 2)
        for round_no in range(args.rounds):
            for server in servers[round_no % len(servers) :] + servers[: round_no % len(servers)]:
                for what, path in (("recall", recall), ("healthz", "/healthz")):
                    figures = drive(server.port, path, key, args.concurrency, args.seconds)
                    results[server.name][what].append(figures)
                    log(f"round {round_no + 1} {server.name} {what}: {json.dumps(figures)}")
        for server in servers:
            held = hold_clients(server.port, key)
            try:
                answers = []
                for _ in range(5):
                    try:
                        status, seconds = request(server.port, recall, key, timeout=5)
                        answers.append(f"{status} in {seconds * 1000:.0f} ms")
                    except TimeoutError:
                        answers.append("no answer in 5 s")
                results[server.name]["recall_with_32_held"] = answers
                log(f"{server.name}, 16 streams + 16 slow POSTs held: {answers}")
            finally:
                for sock in held:
                    sock.close()
    finally:
        for server in servers:
            server.stop()

    print(
        f"\n| server | recall req/s ({args.concurrency} clients) | p50 ms | p99 ms | healthz req/s | errors |"
    )
    print("|---|---|---|---|---|---|")
    for name, figures in results.items():
        rec, hz = figures["recall"], figures["healthz"]
        median = {k: statistics.median(r[k] for r in rec) for k in ("rps", "p50_ms", "p99_ms")}
        print(
            f"| {name} | {median['rps']:.0f} | {median['p50_ms']:.1f} | {median['p99_ms']:.1f} | "
            f"{statistics.median(h['rps'] for h in hz):.0f} | {sum(r['errors'] for r in rec + hz)} |"
        )
    for name, figures in results.items():
        print(f"\n{name}, recall with 16 GET /mcp/ streams and 16 slow POSTs held:")
        print(", ".join(figures["recall_with_32_held"]))
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
