"""How long after a writer hears its commit a listening connection has the notification on its socket: the
window in which another process's key cache could still answer with a row the commit changed
(apikeys/keycache.py). An HTTP client's next request to another process comes at least a round trip later.

    env -u DATABASE_URL .venv/bin/python -m bench.notify_latency [--count 2000]

On the embedded server of DATA_DIR (or ``--db-url``): a writer commits ``pg_notify`` in autocommit, and the
time from its statement's return to the listener's socket being readable is taken, ``count`` times. Zero
means the notification was there before the writer heard its commit.
"""

import argparse
import os
import select
import statistics
import sys
import time

import psycopg

from bench import target

CHANNEL = "bench_notify_latency"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--db-url", default=os.environ.get("DATABASE_URL", ""))
    args = parser.parse_args(argv)
    db = target.resolve(args.db_url, name="postgres")
    waits: list[float] = []
    with (
        psycopg.connect(db.conninfo, autocommit=True) as listener,
        psycopg.connect(db.conninfo, autocommit=True) as writer,
    ):
        listener.execute(f"LISTEN {CHANNEL}")
        for _ in range(args.count):
            writer.execute("SELECT pg_notify(%s, 'x')", [CHANNEL])
            heard = time.perf_counter()
            readable, _, _ = select.select([listener.fileno()], [], [], 0)
            if not readable:
                select.select([listener.fileno()], [], [], 5)
                waits.append(time.perf_counter() - heard)
            else:
                waits.append(0.0)
            list(listener.notifies(timeout=0))
    ordered = sorted(waits)
    at_once = sum(1 for w in waits if w == 0.0)
    print(
        f"\n{args.count} notifications: {at_once} ({at_once / len(waits):.1%}) on the socket "
        "when the writer heard"
    )
    print(
        f"wait after the writer heard: p50 {statistics.median(waits) * 1e6:.0f} µs, "
        f"p99 {ordered[int(len(ordered) * 0.99)] * 1e6:.0f} µs, max {ordered[-1] * 1e6:.0f} µs"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
