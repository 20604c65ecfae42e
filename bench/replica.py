"""What the heavy reads cost the agents' doors, with a streaming replica and without (issue 49).

    env -u DATABASE_URL .venv/bin/python -m bench.replica [--rounds 3] [--seconds 10] [--heavy 2]

On ``bench.load``'s data in the embedded server of DATA_DIR: a streaming standby of that server
(``pg_basebackup`` from the embedded wheel, tests/standby.py), and two ``manage.py serve`` servers (uvicorn,
2 workers of 4 threads, as ``make run``) on the same database, one without a replica and one with
``DATABASE_REPLICA_URL`` naming the standby. Three conditions, in rounds that interleave them (the machine's
noise falls on all three):

- ``quiet``: the server without a replica, nothing else running;
- ``heavy, one node``: the same server while ``--heavy`` client threads loop over staff search across users
  (a common word, first page) and the GDPR export of the heaviest users;
- ``heavy, replica``: the server with the replica under the same heavy loop, whose reads go to the standby.

In each, one client measures the agents' doors: hybrid search of the heaviest user (the top 10 for a
question) and upserts of new keys, p50 and p99. While the upserts run, the replica's lag is sampled every
50 ms: as the primary sees it (``pg_stat_replication.replay_lag``) and as the platform measures it
(``memoryplatform.replica``: 0 when the standby has replayed all it received, else at most the time since it
last was). Both servers and
the standby share the machine: on one host the replica moves the heavy reads to another process, not onto
other cores.
"""

import argparse
import http.client
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psycopg

from bench import target
from bench.http_door import Server
from bench.measure import RUN_TAG, Door, Phase, drive, log, percentile
from bench.scenario import Bench, Settings

CONDITIONS = ("quiet", "heavy, one node", "heavy, replica")


@dataclass
class HeavyLoop:
    """``threads`` clients calling the heavy doors in turn until stopped; counts their calls."""

    server: Server
    key: str
    paths: list[str]
    threads: int
    rate: float  # calls a second, all threads together (0: as fast as they answer)
    calls: int = 0
    errors: list[str] = field(default_factory=list)
    read_from: dict[str, int] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _workers: list[threading.Thread] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _work(self, offset: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=300)
        i = offset
        interval = self.threads / self.rate if self.rate else 0.0
        due = time.perf_counter() + offset * interval / self.threads
        while not self._stop.is_set():
            if interval:  # paced: the same offered load whichever server answers it
                if self._stop.wait(max(0.0, due - time.perf_counter())):
                    break
                due = max(due + interval, time.perf_counter() - interval)
            path = self.paths[i % len(self.paths)]
            i += 1
            try:
                conn.request("GET", path, headers={"Authorization": f"Bearer {self.key}"})
                response = conn.getresponse()
                response.read()
                where = response.getheader("X-Read-From", "primary (no replica)").split(";")[0]
                with self._lock:
                    self.calls += 1
                    self.read_from[where] = self.read_from.get(where, 0) + 1
                    if response.status != 200:
                        self.errors.append(f"{path}: {response.status}")
            except (OSError, http.client.HTTPException) as exc:
                with self._lock:
                    self.errors.append(f"{path}: {exc}")
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=300)
        conn.close()

    def start(self) -> None:
        self._workers = [threading.Thread(target=self._work, args=(n,)) for n in range(self.threads)]
        for worker in self._workers:
            worker.start()

    def stop(self) -> None:
        self._stop.set()
        for worker in self._workers:
            worker.join()


# The platform's own measure (memoryplatform.store.replica_status), on the standby.
PLATFORM_LAG = """SELECT CASE
    WHEN pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() AND EXISTS (SELECT 1 FROM pg_stat_wal_receiver)
    THEN 0.0 ELSE extract(epoch FROM clock_timestamp() - pg_last_xact_replay_timestamp())::float8 END"""
PRIMARY_LAG = "SELECT coalesce(extract(epoch FROM replay_lag)::float8, 0) FROM pg_stat_replication LIMIT 1"


@dataclass
class LagSampler:
    """The replica's lag every 50 ms while running, both ways."""

    primary_conninfo: str
    standby: Any
    platform: list[float] = field(default_factory=list)
    primary: list[float] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def _run(self) -> None:
        caught_up_at: float | None = None  # as memoryplatform.replica bounds the lag after an idle spell
        with (
            psycopg.connect(self.primary_conninfo, autocommit=True) as primary,
            self.standby.connect() as standby,
        ):
            while not self._stop.is_set():
                platform_row = standby.execute(PLATFORM_LAG).fetchone()
                primary_row = primary.execute(PRIMARY_LAG).fetchone()
                now = time.monotonic()
                lag = float(platform_row[0]) if platform_row and platform_row[0] is not None else float("inf")
                if lag == 0.0:
                    caught_up_at = now
                elif caught_up_at is not None:
                    lag = min(lag, now - caught_up_at)
                self.platform.append(lag)
                self.primary.append(float(primary_row[0]) if primary_row and primary_row[0] else 0.0)
                self._stop.wait(0.05)

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


def _merge(phases: list[Phase]) -> dict[str, Any]:
    latencies = [x for p in phases for x in p.latencies]
    wall = sum(p.wall for p in phases)
    return {
        "n": len(latencies),
        "p50_ms": percentile(latencies, 50) * 1000,
        "p99_ms": percentile(latencies, 99) * 1000,
        "rps": len(latencies) / wall if wall else float("nan"),
        "errors": sum(len(p.errors) for p in phases),
    }


def _check_routing(server: Server, key: str, path: str, expected: str) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=300)
    conn.request("GET", path, headers={"Authorization": f"Bearer {key}"})
    response = conn.getresponse()
    response.read()
    got = response.getheader("X-Read-From", "")
    conn.close()
    if response.status != 200 or got != expected:
        raise SystemExit(
            f"{path} on {server.port}: {response.status}, X-Read-From {got!r} (not {expected!r})"
        )


@dataclass
class _Tally:
    """What the rounds measure, by condition."""

    sampler: LagSampler
    phases: dict[str, dict[str, list[Phase]]] = field(
        default_factory=lambda: {c: {"hybrid": [], "upsert": []} for c in CONDITIONS}
    )
    heavy_calls: dict[str, list[float]] = field(default_factory=lambda: {c: [] for c in CONDITIONS})
    read_from: dict[str, dict[str, int]] = field(default_factory=lambda: {c: {} for c in CONDITIONS})


def _heavy_paths(db: target.Target, bench: Bench) -> list[str]:
    """Staff search across users (a common word, first page) and the export of the heaviest users."""
    with psycopg.connect(db.conninfo) as conn:
        users = conn.execute(
            "SELECT user_id FROM usermemory_memoryentry GROUP BY user_id ORDER BY count(*) DESC LIMIT 5"
        ).fetchall()
    heaviest = [u for (u,) in users]
    return [f"/v1/memories/search?q={quote(bench.common)}&limit=50"] + [
        f"/usermemorystore/memories/{quote(u, safe='')}/export" for u in heaviest
    ]


def _condition(
    args: argparse.Namespace,
    bench: Bench,
    server: Server,
    staff: Server | None,
    heavy_paths: list[str],
    question: str,
    condition: str,
    tally: _Tally,
) -> None:
    """One condition of a round: hybrid, then upserts with the lag sampled, under the heavy loop on ``staff``
    if there is one."""
    hybrid: Door = bench.meaning_doors(server, bench.heavy, "hybrid", question)["http"]  # type: ignore[assignment]
    upsert: Door = bench.upsert_doors(server, bench.new_write)["http"]  # type: ignore[assignment]
    loop = None
    if staff is not None:
        loop = HeavyLoop(staff, bench.admin_raw_key, heavy_paths, args.heavy, args.rate)
        loop.start()
    loop_started = time.perf_counter()
    drive(hybrid, n=3, concurrency=1, seconds=5)  # warm-up
    tally.phases[condition]["hybrid"].append(drive(hybrid, n=10**9, concurrency=1, seconds=args.seconds))
    tally.sampler.start()
    tally.phases[condition]["upsert"].append(drive(upsert, n=10**9, concurrency=1, seconds=args.seconds))
    tally.sampler.stop()
    if loop is not None:
        loop.stop()
        tally.heavy_calls[condition].append(loop.calls / (time.perf_counter() - loop_started))
        read_from = tally.read_from[condition]
        for where, count in loop.read_from.items():
            read_from[where] = read_from.get(where, 0) + count
        if loop.errors:
            log(f"heavy loop errors ({len(loop.errors)}): {loop.errors[:3]}")


def _rounds(
    args: argparse.Namespace, bench: Bench, db: target.Target, standby: Any, heavy_paths: list[str]
) -> _Tally:
    """The servers started (with the replica's the second), then ``--rounds`` rounds of the conditions."""
    question = f"what did the user say about {bench.common}?"
    logs = Path(tempfile.gettempdir())
    with_replica = {"DATABASE_REPLICA_URL": standby.url(db.name), "REPLICA_MAX_LAG": str(args.max_lag)}
    one = Server(db.url, logs / f"bench-replica-one-{RUN_TAG}.log")
    two = Server(db.url, logs / f"bench-replica-two-{RUN_TAG}.log", env=with_replica)
    # The heavy reads come through web processes of their own (as staff's tools would reach another web
    # node), configured as the agents' server is: so they load the database, not the agents' processes.
    one_staff = Server(db.url, logs / f"bench-replica-one-staff-{RUN_TAG}.log")
    two_staff = Server(db.url, logs / f"bench-replica-two-staff-{RUN_TAG}.log", env=with_replica)
    servers = {"quiet": one, "heavy, one node": one, "heavy, replica": two}
    staff = {"heavy, one node": one_staff, "heavy, replica": two_staff}
    tally = _Tally(LagSampler(db.conninfo, standby))
    try:
        for server in (one, two, one_staff, two_staff):
            server.start()
        _check_routing(two_staff, bench.admin_raw_key, heavy_paths[1], "replica")
        for server in (one, two):  # every worker loads the embedder before the rounds
            warm = bench.meaning_doors(server, bench.heavy, "hybrid", question)["http"]
            assert warm is not None
            drive(warm, n=40, concurrency=8, seconds=120)
        for round_no in range(args.rounds):
            order = CONDITIONS if round_no % 2 == 0 else tuple(reversed(CONDITIONS))
            for condition in order:
                _condition(
                    args,
                    bench,
                    servers[condition],
                    staff.get(condition),
                    heavy_paths,
                    question,
                    condition,
                    tally,
                )
                summary = {op: _merge(ps[-1:]) for op, ps in tally.phases[condition].items()}
                log(f"round {round_no + 1} {condition}: {json.dumps(summary)}")
    finally:
        for server in (one, two, one_staff, two_staff):
            server.stop()
    return tally


def _summary(args: argparse.Namespace, tally: _Tally) -> dict[str, Any]:
    """The conditions' figures, the lag during the writes, and the run's settings."""
    phases, heavy_calls, read_from, sampler = tally.phases, tally.heavy_calls, tally.read_from, tally.sampler
    return {
        "conditions": {
            c: {
                "hybrid": _merge(phases[c]["hybrid"]),
                "upsert": _merge(phases[c]["upsert"]),
                "heavy_calls_per_s": statistics.median(heavy_calls[c]) if heavy_calls[c] else 0.0,
                "heavy_read_from": read_from[c],
            }
            for c in CONDITIONS
        },
        "lag_during_writes": {
            "platform_p50_s": percentile(sampler.platform, 50),
            "platform_max_s": max(sampler.platform, default=float("nan")),
            "primary_replay_lag_p50_s": percentile(sampler.primary, 50),
            "primary_replay_lag_max_s": max(sampler.primary, default=float("nan")),
            "samples": len(sampler.platform),
        },
        "settings": {
            "rounds": args.rounds,
            "seconds": args.seconds,
            "heavy_threads": args.heavy,
            "heavy_rate": args.rate,
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "command": " ".join(sys.argv),
        },
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    from tests.standby import standby_of

    db = target.resolve("")
    if not target.exists(db):
        raise SystemExit(f"No database {db.name!r}: fill it first with `python -m bench.load`.")
    target.django_setup(db)
    bench = Bench(
        Settings(db=db, n=10**9, concurrency=1, seconds=args.seconds, tail=0, erase_n=1, peers=False)
    )
    bench.prepare()
    from memoryplatform.embedded_db.server import socket_dir

    host = str(socket_dir(target.data_dir()))
    heavy_paths = _heavy_paths(db, bench)
    results: dict[str, Any] = {"data": bench.results["data"], "heavy_paths": heavy_paths}
    log(f"standby of {host}: pg_basebackup")
    started = time.time()
    with standby_of(host=host) as standby:
        log(f"standby streaming in {standby.workdir} after {time.time() - started:.0f} s")
        tally = _rounds(args, bench, db, standby, heavy_paths)
    results.update(_summary(args, tally))
    return results


def report(results: dict[str, Any]) -> str:
    data = results["data"]
    lines = [
        f"data: {data['memories']:,} memories; heaviest user {data['heaviest_user_entries']:,}",
        "",
        "| condition | hybrid p50 ms | hybrid p99 ms | upsert p50 ms | upsert p99 ms | heavy reads/s "
        "| heavy reads went to |",
        "|---|---|---|---|---|---|---|",
    ]
    for condition, c in results["conditions"].items():
        went = ", ".join(f"{k} {v}" for k, v in sorted(c["heavy_read_from"].items())) or "-"
        hybrid, upsert = c["hybrid"], c["upsert"]
        lines.append(
            f"| {condition} | {hybrid['p50_ms']:.1f} | {hybrid['p99_ms']:.1f} | {upsert['p50_ms']:.1f} | "
            f"{upsert['p99_ms']:.1f} | {c['heavy_calls_per_s']:.2f} | {went} |"
        )
    lag = results["lag_during_writes"]
    lines += [
        "",
        f"replica lag during the upsert phases ({lag['samples']} samples every 50 ms): the platform's "
        f"measure p50 {lag['platform_p50_s'] * 1000:.1f} ms, max {lag['platform_max_s'] * 1000:.1f} ms; the "
        f"primary's replay_lag p50 {lag['primary_replay_lag_p50_s'] * 1000:.1f} ms, max "
        f"{lag['primary_replay_lag_max_s'] * 1000:.1f} ms",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=10.0, help="each phase (hybrid, upsert) per round")
    parser.add_argument("--heavy", type=int, default=2, help="client threads of the heavy reads")
    parser.add_argument("--rate", type=float, default=4.0, help="heavy reads a second (0: unpaced)")
    parser.add_argument("--max-lag", type=float, default=5.0, help="REPLICA_MAX_LAG of the replica's server")
    parser.add_argument("--out", help="write the results as JSON here")
    args = parser.parse_args(argv)
    if os.environ.get("DATABASE_URL"):
        raise SystemExit(
            "bench.replica makes its standby from the embedded server: run it without DATABASE_URL"
        )
    results = run(args)
    print(report(results), flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1, default=str))
        log(f"results written to {args.out}")
    errors = sum(c[op]["errors"] for c in results["conditions"].values() for op in ("hybrid", "upsert"))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
