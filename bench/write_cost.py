"""What embeddings cost a write: HTTP upserts on servers that differ only in their embedder, side by side.

    env -u DATABASE_URL .venv/bin/python -m bench.write_cost [--rounds 5] [--seconds 4] [--concurrency 4]

Three ``manage.py serve`` servers (uvicorn, 2 workers of 4 threads, as ``make run``), on one fresh database
``bench_writes`` (the embedded server of DATA_DIR, or ``--db-url`` / DATABASE_URL with its name replaced):

- ``none``: ``EMBEDDINGS_PROVIDER=none``, no vectors at all (the floor);
- ``off-path``: the local model with ``EMBEDDINGS_INLINE_MAX_CHARS=0``: every vector is computed after the
  response, by the process's background thread (with no Celery worker, as ``make run`` runs);
- ``default``: the local model with the default settings: entries up to ``EMBEDDINGS_INLINE_MAX_CHARS``
  characters are embedded in the request, longer ones in the background.

Each server gets the same upserts (new keys, values of 60 to 300 characters, and a share of short ones of
20 to 40 characters), in rounds that interleave the servers, so the machine's noise falls on all three. The
report gives each server's p50/p99 and throughput over all rounds, and each one's ratio to ``none``.
"""

import argparse
import os
import random
import statistics
import sys
import tempfile
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
}


def text(rng: random.Random) -> str:
    low, high = (20, 40) if rng.random() < SHORT_SHARE else (60, 300)
    words: list[str] = []
    while sum(len(w) + 1 for w in words) < rng.randint(low, high):
        words.append(rng.choice(WORDS) + ("" if rng.random() < 0.7 else str(rng.randint(1, 999))))
    return " ".join(words)[:high]


def prepare(db_url: str) -> tuple[target.Target, str]:
    db = target.resolve(db_url, name=DB_NAME)
    target.create(db, reset=True)
    target.django_setup(db)
    from django.core.management import call_command

    from apikeys.services import agent_create, apikey_create
    from usermemory import services

    call_command("migrate", verbosity=0, interactive=False)
    agent_create(agent_id=AGENT, display_name="write-cost bench")
    services.policy_update(agent_id=AGENT, max_entries_per_user=100_000, max_writes_per_turn=100_000)
    _, raw_key = apikey_create(role="agent", agent_id=AGENT, label="write-cost bench")
    return db, raw_key


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=4.0, help="per server and round")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--db-url", default=os.environ.get("DATABASE_URL", ""))
    args = parser.parse_args(argv)
    db, key = prepare(args.db_url)
    logdir = Path(tempfile.mkdtemp(prefix="write-cost-"))
    servers = {name: Server(db.url, logdir / f"{name}.log", env) for name, env in SERVERS.items()}
    latencies: dict[str, list[float]] = {name: [] for name in servers}
    walls: dict[str, float] = dict.fromkeys(servers, 0.0)
    errors: dict[str, int] = dict.fromkeys(servers, 0)
    try:
        for server in servers.values():
            server.start()
        for number in range(
            args.rounds + 1
        ):  # round 0 warms each server up (the model's load) and counts not
            for name, server in servers.items():
                rng = random.Random(f"{number}-{name}")

                def request(rng: random.Random = rng) -> tuple[str, str, Any, set[int]]:
                    body = {
                        "userId": f"user-{rng.randrange(USERS)}",
                        "key": f"fact-{next(SEQ)}",
                        "value": text(rng),
                        "category": "fact",
                    }
                    return "PUT", "/usermemorystore/memories", body, {200, 201}

                phase = drive(
                    server.door(key, request), n=10**9, concurrency=args.concurrency, seconds=args.seconds
                )
                if number:
                    latencies[name] += phase.latencies
                    walls[name] += phase.wall
                    errors[name] += len(phase.errors)
            log(f"round {number} done" + (" (warm-up, not counted)" if number == 0 else ""))
    finally:
        for server in servers.values():
            server.stop()
        target.drop(db)
    floor = statistics.median(latencies["none"])
    print(
        f"\nHTTP upserts, {args.rounds} rounds of {args.seconds:g} s per server, {args.concurrency} clients"
    )
    print("\n| server | n | p50 ms | p99 ms | req/s | p50 vs none | req/s vs none | errors |")
    print("|---|---|---|---|---|---|---|---|")
    floor_rps = len(latencies["none"]) / walls["none"]
    for name, values in latencies.items():
        ordered = sorted(values)
        p50 = statistics.median(values)
        p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
        rps = len(values) / walls[name]
        print(
            f"| {name} | {len(values)} | {p50 * 1000:.2f} | {p99 * 1000:.2f} | {rps:.0f} | "
            f"{p50 / floor - 1:+.1%} | {rps / floor_rps - 1:+.1%} | {errors[name]} |"
        )
    return 1 if any(errors.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
