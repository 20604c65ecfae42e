"""Upserts per second, direct and through a transaction-pooling PgBouncer, prepared statements on and off.

    env -u DATABASE_URL .venv/bin/python -m bench.pooler [--rounds 5] [--seconds 4] [--concurrency 4]

Three ``manage.py serve`` servers (uvicorn, 2 workers of 4 threads, as ``make run``) on one fresh database
``bench_pooler`` (the embedded server of DATA_DIR, or ``--db-url`` / DATABASE_URL with its name replaced), no
embeddings (``EMBEDDINGS_PROVIDER=none``: the database path alone):

- ``direct-prepared``: DATABASE_URL straight to PostgreSQL, ``PREPARED_STATEMENTS=true`` (the default);
- ``direct-unprepared``: the same, ``PREPARED_STATEMENTS=false``;
- ``pgbouncer``: DATABASE_URL through Debian's pgbouncer in transaction mode (tests/pgbouncer.py starts it),
  ``DATABASE_POOLER=pgbouncer`` (prepared statements off: PgBouncer 1.18 cannot keep them),
  ``DATABASE_LISTEN_URL`` direct.

Each server gets the same kind of upserts (new keys, bench.write_cost's values) in rounds that interleave the
servers, so the machine's noise falls on all three; round 0 warms up and is not counted.
"""

import argparse
import random
import statistics
import sys
import tempfile
from pathlib import Path

from psycopg.conninfo import conninfo_to_dict

from bench import target
from bench.http_door import Server
from bench.measure import drive, log
from bench.write_cost import prepare, round_arguments, upserts

DB_NAME = "bench_pooler"
AGENT = "pooler-bench"


def server_settings(db: target.Target, pooled_url: str) -> dict[str, tuple[str, dict[str, str]]]:
    """Each server's DATABASE_URL and settings."""
    common = {"EMBEDDINGS_PROVIDER": "none", "DATABASE_POOLER": "", "DATABASE_LISTEN_URL": ""}
    return {
        "direct-prepared": (db.url, common | {"PREPARED_STATEMENTS": "true"}),
        "direct-unprepared": (db.url, common | {"PREPARED_STATEMENTS": "false"}),
        "pgbouncer": (
            pooled_url,
            common
            | {"DATABASE_POOLER": "pgbouncer", "DATABASE_LISTEN_URL": db.url, "PREPARED_STATEMENTS": ""},
        ),
    }


def measure(
    servers: dict[str, Server], key: str, args: argparse.Namespace
) -> dict[str, tuple[list[float], float]]:
    """Latencies and wall time per server over the counted rounds."""
    results: dict[str, tuple[list[float], float]] = {name: ([], 0.0) for name in servers}
    for number in range(args.rounds + 1):
        for name, server in servers.items():
            requests = upserts(random.Random(f"{number}-{name}"), users_of=name)
            phase = drive(
                server.door(key, requests), n=10**9, concurrency=args.concurrency, seconds=args.seconds
            )
            if phase.errors:
                raise RuntimeError(f"{name}: {len(phase.errors)} errors, e.g. {phase.errors[0]}")
            if number:
                latencies, wall = results[name]
                results[name] = (latencies + phase.latencies, wall + phase.wall)
        log(f"round {number} done" + (" (warm-up, not counted)" if number == 0 else ""))
    return results


def report(results: dict[str, tuple[list[float], float]], args: argparse.Namespace) -> None:
    print(
        f"\nHTTP upserts, {args.rounds} rounds of {args.seconds:g} s per server, {args.concurrency} clients"
    )
    print("\n| server | n | p50 ms | p99 ms | upserts/s | vs direct-prepared |")
    print("|---|---|---|---|---|---|")
    base_latencies, base_wall = results["direct-prepared"]
    base = len(base_latencies) / base_wall
    for name, (latencies, wall) in results.items():
        ordered = sorted(latencies)
        p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
        rate = len(latencies) / wall
        print(
            f"| {name} | {len(latencies)} | {statistics.median(latencies) * 1000:.2f} | {p99 * 1000:.2f} | "
            f"{rate:.0f} | {rate / base - 1:+.1%} |"
        )


def main(argv: list[str] | None = None) -> int:
    parser = round_arguments(__doc__)
    args = parser.parse_args(argv)
    db, key = prepare(args.db_url, name=DB_NAME, agent=AGENT)
    from tests.pgbouncer import pgbouncer

    server_params = conninfo_to_dict(db.conninfo)
    logdir = Path(tempfile.mkdtemp(prefix="pooler-"))
    try:
        with pgbouncer(
            host=str(server_params.get("host", "")),
            port=str(server_params.get("port", "5432")),
            user=str(server_params.get("user", "")),
            password=str(server_params.get("password", "")),
        ) as bouncer:
            servers = {
                name: Server(url, logdir / f"{name}.log", env)
                for name, (url, env) in server_settings(db, bouncer.url(db.name)).items()
            }
            try:
                for server in servers.values():
                    server.start()
                results = measure(servers, key, args)
            finally:
                for server in servers.values():
                    server.stop()
    finally:
        target.drop(db)
    report(results, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
