"""Serving: ``manage.py serve`` (uvicorn, ``config.asgi``: Django as WSGI on our own thread bridge,
``memoryplatform.asgi_wsgi``), started on the bench database and driven with the same requests at each
concurrency. ``SERVERS`` lists the stacks to compare side by side, in alternating rounds.

Issue 48's run (``bench/RESULTS.md``), at commit 91f628b, compared four: gunicorn's gthread workers with
a2wsgi (``serve --server gunicorn``, 2 x 4 threads, since removed); the bridge (2 x 4 threads, a connection
kept per thread); Django's own ASGI handler (``get_asgi_application()``, then
``memoryplatform/asgi_django.py``) behind the same front, with Django's connection pool
(``DATABASE_POOL_MAX=4`` a worker, psycopg_pool) and the process's own listening connection
(``DATABASE_LISTEN_URL``); and that handler with at most 4 requests in Django a worker. Commit 98465dd has
the handler as ``serve`` ran it, before it was set aside.

    DATA_DIR=... .venv/bin/python -m bench.load --reset --memories 100000 --users 1000 --agents 50
    DATA_DIR=... .venv/bin/python -m bench.serving --seconds 4 --rounds 3 --concurrency 8,32

Measured for each ``--concurrency`` (clients on kept-alive connections, ``--seconds`` per round): an agent's
recall (``GET .../{typical user}/visible``), a hybrid search (top 10, the query embedded by the local model),
an upsert (``PUT /usermemorystore/memories``, a new key each), an MCP ``tools/call``
(``get_visible_memories``, a POST to ``/mcp/``) and ``GET /healthz``; then the same recall from one client
while 16 ``GET /mcp/`` and 16 slow POSTs are held open.
"""

import argparse
import http.client
import itertools
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

from bench import target

ROOT = target.ROOT
SERVERS: dict[str, tuple[list[str], dict[str, str]]] = {
    "serve: uvicorn + our bridge (2 x 4 threads)": (["--workers", "2", "--threads", "4"], {}),
}
"""Name: (``serve``'s arguments, or a whole command starting with this interpreter; environment)."""
SEQ = itertools.count()
Call = Callable[[], tuple[str, str, bytes | None, dict[str, str]]]


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
        if args[0] == sys.executable:  # a server of its own, not through serve
            cmd = [*args, "--port", str(self.port)]
            env = env | {"PROMETHEUS_MULTIPROC_DIR": _metrics_dir(self.port)}
        else:
            cmd = [
                sys.executable,
                "manage.py",
                "serve",
                "--port",
                str(self.port),
                "--no-background",
                *args,
            ]
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


def _metrics_dir(port: int) -> str:
    directory = Path(f"/tmp/bench-serving-metrics-{port}")  # noqa: S108
    directory.mkdir(exist_ok=True)
    return str(directory)


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


def drive(port: int, call: Call, key: str, clients: int, seconds: float) -> dict[str, float]:
    """``clients`` threads, each on one kept-alive connection, making ``call()``'s request for ``seconds``:
    req/s and latencies."""
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
            method, path, body, extra = call()
            headers = {"Authorization": f"Bearer {key}", **extra}
            started = time.perf_counter()
            try:
                conn.request(method, path, body=body, headers=headers)
                response = conn.getresponse()
                response.read()
                if response.status >= 300:
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


def operations(user: str, question: str) -> dict[str, Call]:
    """The requests measured, by name."""
    json_type = {"Content-Type": "application/json"}
    mcp_headers = {**json_type, "Accept": "application/json, text/event-stream"}
    search = f"/usermemorystore/memories/{user}/search?q={quote(question)}&mode=hybrid&limit=10"

    def upsert() -> tuple[str, str, bytes | None, dict[str, str]]:
        n = next(SEQ)
        body = {"userId": user, "key": f"serving-{os.getpid()}-{n}", "value": f"bench serving fact {n}",
                "category": "fact", "visibility": "self"}  # fmt: skip
        return (
            "PUT",
            "/usermemorystore/memories",
            json.dumps(body).encode(),
            {**json_type, "X-Turn-Id": f"t{n}"},
        )

    def mcp() -> tuple[str, str, bytes | None, dict[str, str]]:
        body = {"jsonrpc": "2.0", "id": next(SEQ), "method": "tools/call",
                "params": {"name": "get_visible_memories", "arguments": {"userId": user}}}  # fmt: skip
        return "POST", "/mcp/", json.dumps(body).encode(), mcp_headers

    return {
        "recall": lambda: ("GET", f"/usermemorystore/memories/{user}/visible", None, {}),
        "hybrid search": lambda: ("GET", search, None, {}),
        "upsert": upsert,
        "mcp tools/call": mcp,
        "healthz": lambda: ("GET", "/healthz", None, {}),
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


def prepare(db: target.Target) -> tuple[str, str, str]:
    """An agent key of the bench agent, the typical user (median number of entries), and a question."""
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
    return raw_key, sizes[len(sizes) // 2][0], f"what did the user say about {data.search_terms()[0]}?"


def held_recalls(server: Served, recall: str, key: str) -> list[str]:
    held = hold_clients(server.port, key)
    try:
        answers = []
        for _ in range(5):
            try:
                status, seconds = request(server.port, recall, key, timeout=5)
                answers.append(f"{status} in {seconds * 1000:.0f} ms")
            except TimeoutError:
                answers.append("no answer in 5 s")
        return answers
    finally:
        for sock in held:
            sock.close()


def report(results: dict[str, Any], levels: list[int]) -> None:
    for clients in levels:
        print(f"\n{clients} clients: req/s, p50 / p99 ms (median of the rounds), errors")
        names = list(results)
        ops = list(next(iter(results.values()))[str(clients)])
        print("| operation | " + " | ".join(names) + " |")
        print("|---" * (len(names) + 1) + "|")
        for op in ops:
            cells = []
            for name in names:
                rounds = results[name][str(clients)][op]
                med = {k: statistics.median(r[k] for r in rounds) for k in ("rps", "p50_ms", "p99_ms")}
                errors = sum(r["errors"] for r in rounds)
                cells.append(
                    f"{med['rps']:.0f}, {med['p50_ms']:.1f} / {med['p99_ms']:.1f}"
                    + (f", {errors} err" if errors else "")
                )
            print(f"| {op} | " + " | ".join(cells) + " |")
    for name, figures in results.items():
        print(f"\n{name}, recall with 16 GET /mcp/ and 16 slow POSTs held: " + ", ".join(figures["held"]))


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--db-url", default=os.environ.get("DATABASE_URL", ""))
    parser.add_argument("--concurrency", default="8,32", help="client counts, comma-separated")
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", default="", help="servers whose name holds this (default: all)")
    parser.add_argument("--out", help="write the results as JSON here")
    args = parser.parse_args()
    levels = [int(n) for n in args.concurrency.split(",")]
    db = target.resolve(args.db_url)
    key, user, question = prepare(db)
    env = os.environ | {"DATABASE_URL": db.url, "DEBUG": "false"}
    env.pop("REDIS_URL", None)
    logfile = Path("/tmp/bench-serving.log")  # noqa: S108
    ops = operations(user, question)
    chosen = {name: spec for name, spec in SERVERS.items() if args.only in name}
    results: dict[str, Any] = {name: {str(n): {op: [] for op in ops} for n in levels} for name in chosen}

    servers = [Served(name, extra, env | more, logfile) for name, (extra, more) in chosen.items()]
    try:
        for server in servers:  # warm-up: every worker, its connections and caches, the model
            for call in ops.values():
                drive(server.port, call, key, max(levels), 1.5)
        for round_no in range(args.rounds):
            for server in servers[round_no % len(servers) :] + servers[: round_no % len(servers)]:
                for clients in levels:
                    for op, call in ops.items():
                        figures = drive(server.port, call, key, clients, args.seconds)
                        results[server.name][str(clients)][op].append(figures)
                        log(f"round {round_no + 1} {server.name} {clients}c {op}: {json.dumps(figures)}")
        recall = f"/usermemorystore/memories/{user}/visible"
        for server in servers:
            results[server.name]["held"] = held_recalls(server, recall, key)
            log(f"{server.name}, 16 streams + 16 slow POSTs held: {results[server.name]['held']}")
    finally:
        for server in servers:
            server.stop()
    report(results, levels)
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
