"""Run the benchmarks: every operation through three doors (raw SQL, service, HTTP), side by side, in one run.

    env -u DATABASE_URL .venv/bin/python -m bench.run --out /tmp/run.json   # the embedded server's bench
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench .venv/bin/python -m bench.run --out /tmp/pg.json
    .venv/bin/python -m bench.run --smoke      # a few hundred memories, every operation a few times

The database must have been filled by ``python -m bench.load`` first (the run writes to it: new keys,
updates, erasures); without DATABASE_URL (or --db-url) it is ``bench`` in the embedded server of DATA_DIR.
Each door is measured twice: one client (median and p99 latency), then ``--concurrency`` clients
(throughput). ``http`` is ``manage.py serve`` (uvicorn, 2 workers of 4 threads, as ``make run`` runs it) on
loopback, started and stopped by this run.

Modules: ``target`` (which database), ``measure`` (phases, doors, drive), ``raw_sql`` and ``raw`` (the raw
door's statements and their calls), ``http_door`` (the server), ``peers`` (LangGraph, the Agents SDK),
``scenario`` (set-up and the operations), ``queries`` (query counts), ``results`` (tables and targets),
``smoke``; this module is the command line.
"""

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from bench import target
from bench.http_door import Server
from bench.measure import RUN_TAG, log
from bench.results import report, targets
from bench.scenario import Bench, Settings
from bench.smoke import smoke


def run(cfg: Settings, out: str | None) -> int:
    if not target.exists(cfg.db):
        raise SystemExit(f"No database {cfg.db.name!r}: fill it first with `python -m bench.load`.")
    target.django_setup(cfg.db)
    from django.db import connection

    bench = Bench(cfg)
    bench.prepare()
    bench.open_peers()
    started = time.time()
    server = Server(cfg.db.url, Path(tempfile.gettempdir()) / f"bench-serve-{RUN_TAG}.log")
    try:
        server.start()
        bench.run_ops(server)
        if not cfg.only:
            bench.explain_searches()
            bench.upsert_tail(server)
    finally:
        server.stop()
    bench.query_counts()
    bench.run_peers()
    connection.close()
    results = bench.results
    results["settings"] = {
        "database": "postgresql",
        "embedded": cfg.db.embedded,
        "url": cfg.db.url,
        "n_single_client": cfg.n,
        "concurrency": cfg.concurrency,
        "seconds_per_phase": cfg.seconds,
        "tail": cfg.tail,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cpus, Python {platform.python_version()}",
        "duration_s": round(time.time() - started, 1),
        "command": " ".join(sys.argv),
    }
    results["targets"] = targets(results)
    text = report(results)
    print(text, flush=True)
    if out:
        Path(out).write_text(json.dumps(results, indent=1, default=str))
        log(f"results written to {out}")
    errors = sum(
        v[p]["errors"] for doors in results["ops"].values() for v in doors.values() for p in ("c1", "cN")
    )
    errors += sum(v["errors"] for v in results["tail"].values())
    return 1 if errors else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--smoke", action="store_true", help="tiny run on a throwaway database; exit 0 when all pass"
    )
    parser.add_argument(
        "--db-url", default=os.environ.get("DATABASE_URL", ""), help="default: the embedded server's bench"
    )
    parser.add_argument("--n", type=int, default=300, help="calls per door with one client (latency)")
    parser.add_argument("--concurrency", type=int, default=4, help="clients for the throughput phase")
    parser.add_argument("--seconds", type=float, default=8.0, help="time limit of each phase")
    parser.add_argument(
        "--tail", type=int, default=10_000, help="upserts per door for the p99.9 tail (0: skip)"
    )
    parser.add_argument(
        "--erase-n", type=int, default=20, help="erasures per door and phase (each erases a user)"
    )
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--tail-seconds", type=float, default=120.0, help="time limit of each tail run")
    parser.add_argument("--only", default="", help="run only the operations whose name contains this")
    parser.add_argument("--no-peers", dest="peers", action="store_false")
    parser.add_argument("--out", help="write the results as JSON here")
    args = parser.parse_args(argv)
    if args.smoke:
        return smoke()
    cfg = Settings(
        db=target.resolve(args.db_url),
        n=args.n,
        concurrency=args.concurrency,
        seconds=args.seconds,
        tail=args.tail,
        erase_n=args.erase_n,
        peers=args.peers,
        warmup=args.warmup,
        tail_seconds=args.tail_seconds,
        only=args.only,
    )
    return run(cfg, args.out)


if __name__ == "__main__":
    sys.exit(main())
