"""Reads under background load (issue 34): an agent's recall and hybrid search while its node embeds a
backlog.

    DATA_DIR=/work/benchdata env -u DATABASE_URL .venv/bin/python -m bench.background_load \\
        [--backlog 20000] [--seconds 20] [--variants before,after]

On the data ``bench.load`` left (1M memories with vectors), one ``manage.py serve`` (2 workers x 4 threads, as
``make run``; no background process of its own), and an agent key of ``agent-00``. The heaviest user and a
typical one (the median by entries). Operations, one client: hybrid search (``/search?mode=hybrid``) and
recall (``/visible``) of each user. Phases, all in one run:

- ``idle``: nothing else runs;
- one phase per variant of the vector consumer, each over a backlog of its own: ``--backlog`` entries of other
  users lose their vectors and are queued, as an import of that many memories leaves them, and a consumer
  (a Celery worker of the ``vectors`` queue, ``bench.write_cost.start_consumer``) starts; the reads run while
  it drains, and the drain rate (vectors a second) is read from the queue. Variants:
  - ``before``: the consumer as the serving processes' old background thread ran it: priority unchanged
    (``BACKGROUND_NICE=0``), the local model's 2 threads (``BACKGROUND_EMBEDDINGS_THREADS=2``);
  - ``nice``: nice 10 and 1 thread, without ``SCHED_IDLE`` (session 12's defaults);
  - ``after``: ``SCHED_IDLE``, nice 10, 1 thread;
  - ``paced``: as ``nice``, with Dream's batches of 200 rows and 0.2 s between them (its Dream phase only);
  - ``nice19``: as ``nice``, started under ``nice -n 19`` (the operating system's own means, issue 48);
  - ``duty50``, ``duty33`` (the default since session 14), ``duty20``: as ``nice``, with the duty cycle
    (``BACKGROUND_DUTY`` 0.5, 0.33, 0.2: while the node is busy with others' work, background work sleeps
    after each batch so that it takes that share of the time); ``before-duty33``: as ``before`` (nice 0, 2
    threads), with the duty cycle at 0.33. ``before``, ``nice``, ``after`` and ``paced`` run with
    ``BACKGROUND_DUTY=1`` (no duty cycle), as they did before it.

  With ``--idle-drain S``, each backlog phase first lets the consumer drain for S seconds with no reads, and
  reports that rate too: the duty cycle must not slow an idle node.

  Whatever is left of a variant's backlog is removed from the queue when its phase ends (those entries stay
  without a vector, found by their words);
- ``dream <variant>`` (with ``--dream``), one per variant: one Dream cycle (``manage.py dream``, a process of
  its own with the variant's priority and threads) with Dream on for five agents of its own
  (``--dream-first``): stale pruning, contradictions, and summaries, whose LLM calls ``bench.extraction``'s
  scripted OpenAI-compatible server answers); the reads run in rounds for as long as the cycle does, at most
  ``--dream-seconds`` (a cycle still running then is stopped, and the phase says so), and the cycle's wall
  time and counts are reported. A Dream phase changes the data (it prunes and summarises): reload it before
  another run.

With ``--idle-rounds S``, an ``idle, in rounds`` phase reads with nothing else running for S seconds in the
Dream phases' pattern (rounds of 5 of each read, in turn) rather than the other phases' (300 of one read,
then the next): the Dream phases' own baseline.

Reported: p50 and p99 of each operation in each phase, their ratio to idle, and each backlog's drain rate.
"""

import argparse
import os
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
from bench.dream_cycle import dream_counts, dream_process
from bench.http_door import Server
from bench.measure import drive, log
from bench.write_cost import start_consumer

AGENT = "agent-00"
_THREADS = "BACKGROUND_EMBEDDINGS_THREADS"
_NICE = {"BACKGROUND_SCHED_IDLE": "false", "BACKGROUND_NICE": "10", _THREADS: "1"}
VARIANTS = {
    "before": _NICE | {"BACKGROUND_NICE": "0", _THREADS: "2", "BACKGROUND_DUTY": "1"},
    "nice": _NICE | {"BACKGROUND_DUTY": "1"},
    "after": _NICE | {"BACKGROUND_SCHED_IDLE": "true", "BACKGROUND_DUTY": "1"},
    # nice's, with Dream's batches small and paced (the consumer is as nice's)
    "paced": _NICE | {"BACKGROUND_DUTY": "1", "DREAM_BATCH_SIZE": "200", "DREAM_BATCH_PAUSE": "0.2"},
    # nice's, with the duty cycle (memoryplatform/duty.py): half the time, or a third (the default)
    "duty50": _NICE | {"BACKGROUND_DUTY": "0.5"},
    "duty33": _NICE | {"BACKGROUND_DUTY": "0.33"},
    "duty20": _NICE | {"BACKGROUND_DUTY": "0.2"},
    # before's (nice 0, 2 threads), with the default duty cycle: does it tame an aggressive consumer?
    "before-duty33": _NICE | {"BACKGROUND_NICE": "0", _THREADS: "2", "BACKGROUND_DUTY": "0.33"},
    # the operating system's own means alone (issue 48): `nice -n 19` on the process, 1 thread, no duty cycle
    "nice19": _NICE | {"BACKGROUND_DUTY": "1"},
}
# A command the variant's process runs under.
PREFIX: dict[str, tuple[str, ...]] = {"nice19": ("nice", "-n", "19")}
QUESTION = "what did the user say about travel and food?"


def _users() -> tuple[str, str]:
    """The heaviest user and the median one, by entries."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT user_id, count(*) FROM usermemory_memoryentry GROUP BY user_id ORDER BY count(*) DESC"
        )
        sizes = cursor.fetchall()
    return sizes[0][0], sizes[len(sizes) // 2][0]


def _key() -> str:
    from apikeys.services import apikey_create

    _, raw = apikey_create(role="agent", agent_id=AGENT, label="background-load bench")
    return raw


def _queue_backlog(n: int, *, spare: tuple[str, ...]) -> None:
    """Take ``n`` entries of other users than ``spare``: their vectors go, and they are queued."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TEMP TABLE IF NOT EXISTS backlog AS SELECT id FROM usermemory_memoryentry LIMIT 0; "
            "TRUNCATE backlog"
        )
        cursor.execute(
            "INSERT INTO backlog SELECT e.id FROM usermemory_memoryentry e "
            "JOIN usermemory_entryembedding v ON v.entry_id = e.id "
            "WHERE e.user_id <> ALL(%(spare)s) LIMIT %(n)s",
            {"spare": list(spare), "n": n},
        )
        cursor.execute("DELETE FROM usermemory_entryembedding v USING backlog b WHERE v.entry_id = b.id")
        cursor.execute(
            "INSERT INTO usermemory_pendingentryvector (entry_id) SELECT id FROM backlog "
            "ON CONFLICT DO NOTHING"
        )


def _pending() -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM usermemory_pendingentryvector")
        return int(cursor.fetchone()[0])


def _clear_queue() -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM usermemory_pendingentryvector")


def _reads(server: Server, key: str, users: dict[str, str], *, n: int, seconds: float) -> dict[str, Any]:
    from urllib.parse import quote

    results: dict[str, Any] = {}
    for label, user in users.items():
        for op, path in (
            (
                "hybrid search",
                f"/usermemorystore/memories/{user}/search?q={quote(QUESTION)}&mode=hybrid&limit=10",
            ),
            ("recall", f"/usermemorystore/memories/{user}/visible?limit=20"),
        ):
            phase = drive(server.door(key, _get(path)), n=n, concurrency=1, seconds=seconds)
            if phase.errors:
                raise RuntimeError(f"{op} {label}: {phase.errors[:3]}")
            results[f"{op}, {label}"] = sorted(phase.latencies)
    return results


DREAM_AGENTS = 5


def _dream_agents(variants: list[str], first: int) -> dict[str, list[str]]:
    """Five agents of its own for each Dream variant, from ``agent-<first>`` on, so that all find the same
    kind of work (the generator deals entries to agents alike); agent-00, whose key reads, is in none."""
    return {
        name: [f"agent-{first + n * DREAM_AGENTS + i:02d}" for i in range(DREAM_AGENTS)]
        for n, name in enumerate(variants)
    }


def _reads_while(
    server: Server, key: str, users: dict[str, str], process: subprocess.Popen[bytes], cap: float
) -> tuple[dict[str, list[float]], bool]:
    """Rounds of a few of each read, one after another, for as long as ``process`` runs, or ``cap`` seconds,
    whichever ends first; then a process still running is stopped (SIGTERM to its group). A round in which
    it ended is left out, so every latency kept was taken while it ran. Returns the latencies, and whether
    the process was stopped at the cap."""
    results = _rounds(server, key, users, until=lambda: process.poll() is not None, cap=cap)
    stopped = process.poll() is None
    if stopped:
        os.killpg(process.pid, signal.SIGTERM)
    return results, stopped


def _rounds(
    server: Server, key: str, users: dict[str, str], *, until: Callable[[], bool], cap: float
) -> dict[str, list[float]]:
    """Rounds of 5 of each read, one after another, until ``until()`` or ``cap`` seconds; a round in which
    ``until()`` became true is left out."""
    results: dict[str, list[float]] = {}
    deadline = time.monotonic() + cap
    while not until() and time.monotonic() < deadline:
        batch = _reads(server, key, users, n=5, seconds=10)
        if until():
            break
        for op, values in batch.items():
            results.setdefault(op, []).extend(values)
    return {op: sorted(values) for op, values in results.items()}


def _dream_phase(
    server: Server,
    key: str,
    users: dict[str, str],
    db_url: str,
    logdir: Path,
    variant: str,
    agents: list[str],
    cap: float,
) -> tuple[dict[str, Any], str]:
    """The reads while one Dream cycle runs (a process of its own at the variant's priority and threads, the
    scripted LLM answering its summaries) over the variant's agents, for at most ``cap`` seconds. The key
    vectors an earlier cycle kept are deleted first, so that every variant's cycle embeds its keys."""
    from dream.models import KeyVector

    KeyVector.objects.all().delete()
    log_path = logdir / f"dream-{variant}.log"
    started = time.monotonic()
    with dream_process(db_url, agents, log_path, VARIANTS[variant], prefix=PREFIX.get(variant, ())) as dream:
        results, stopped = _reads_while(server, key, users, dream, cap)
    took = time.monotonic() - started
    if stopped:
        return (
            results,
            f"stopped at the cap after {took:.0f} s, mid-cycle (`manage.py dream` log: {log_path})",
        )
    return results, f"cycle {took:.0f} s, exit {dream.returncode}: {dream_counts(log_path)}"


def _backlog_phase(
    server: Server,
    key: str,
    users: dict[str, str],
    db_url: str,
    logdir: Path,
    variant: str,
    args: argparse.Namespace,
    drains: dict[str, str],
) -> dict[str, Any]:
    """The reads while the variant's consumer drains the queued backlog (after ``--idle-drain`` seconds of
    draining alone); each drain rate goes into ``drains``."""
    consumer = start_consumer(
        db_url, logdir / f"consumer-{variant}.log", VARIANTS[variant], prefix=PREFIX.get(variant, ())
    )
    if args.idle_drain:
        started, queued = time.monotonic(), _pending()
        time.sleep(args.idle_drain)
        alone, took = queued - _pending(), time.monotonic() - started
        drains[f"{variant}, no reads"] = f"{alone} in {took:.0f} s: {alone / took:.1f}/s"
    started, queued = time.monotonic(), _pending()
    try:
        results = _reads(server, key, users, n=args.n, seconds=args.seconds)
    finally:
        left, took = _pending(), time.monotonic() - started
        # SIGTERM to the worker's main process alone, as serve stops it (one to its pool too can leave it
        # hanging); its warm shutdown lets the running drain end (EMBEDDINGS_DRAIN_SECONDS, 60 s at most)
        consumer.send_signal(signal.SIGTERM)
        try:
            consumer.wait(timeout=90)
        except subprocess.TimeoutExpired:
            os.killpg(consumer.pid, signal.SIGKILL)
            consumer.wait(timeout=30)
    drains[variant] = f"{queued - left} of {queued} in {took:.0f} s: {(queued - left) / took:.1f}/s"
    return results


def _get(path: str) -> Callable[[], tuple[str, str, Any, set[int]]]:
    def request() -> tuple[str, str, Any, set[int]]:
        return "GET", path, None, {200}

    return request


def _p(values: list[float], share: float) -> float:
    return values[min(len(values) - 1, int(len(values) * share))] * 1000


def _report(backlog: int, phases: dict[str, dict[str, Any]], drains: dict[str, str]) -> None:
    """Each operation's p50 and p99 in each phase with their ratio to idle, then the drains."""
    idle = phases["idle"]
    print(f"\nReads under background load, 1 client; backlog {backlog} entries per variant")
    print("\n| operation | phase | n | p50 ms | p99 ms | p50 / idle | p99 / idle |")
    print("|---|---|---|---|---|---|---|")
    for op, base in idle.items():
        for phase, results in phases.items():
            values = results[op]
            print(
                f"| {op} | {phase} | {len(values)} | {_p(values, 0.5):.1f} | {_p(values, 0.99):.1f} | "
                f"{_p(values, 0.5) / _p(base, 0.5):.2f} | {_p(values, 0.99) / _p(base, 0.99):.2f} |"
            )
    print("\n| phase | drained, or the Dream cycle |\n|---|---|")
    for name, text in drains.items():
        print(f"| {name} | {text} |")
    medians = statistics.median([_p(v, 0.5) for v in idle.values()])
    print(f"\nload average at the end: {os.getloadavg()}; median of the idle p50s {medians:.1f} ms")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backlog", type=int, default=20_000)
    parser.add_argument("--seconds", type=float, default=20.0, help="per operation and phase, at most")
    parser.add_argument("--n", type=int, default=300, help="requests per operation and phase, at most")
    parser.add_argument("--variants", default="before,nice,duty33")
    parser.add_argument(
        "--idle-drain", type=float, default=0.0, help="per backlog phase: seconds of drain alone first"
    )
    parser.add_argument(
        "--dream-first",
        type=int,
        default=1,
        help="Dream variants: 5 agents each from agent-<this>",
    )
    parser.add_argument(
        "--idle-rounds",
        type=float,
        default=0.0,
        help="seconds of idle reads in the Dream phases' rounds of 5 (their own idle baseline)",
    )
    parser.add_argument("--dream", action="store_true", help="a Dream cycle phase per variant too, last")
    parser.add_argument(
        "--dream-seconds",
        type=float,
        default=180.0,
        help="a Dream phase's cap: a cycle still running is stopped",
    )
    parser.add_argument("--db-url", default=os.environ.get("DATABASE_URL", ""))
    args = parser.parse_args(argv)
    db = target.resolve(args.db_url)
    target.django_setup(db)
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    heavy, typical = _users()
    users = {"heaviest": heavy, "typical": typical}
    key = _key()
    _clear_queue()
    logdir = Path(tempfile.mkdtemp(prefix="background-load-"))
    server = Server(db.url, logdir / "serve.log")
    phases: dict[str, dict[str, Any]] = {}
    drains: dict[str, str] = {}
    server.start()
    try:
        _reads(server, key, users, n=20, seconds=5)  # warm-up: the model, the caches
        phases["idle"] = _reads(server, key, users, n=args.n, seconds=args.seconds)
        log("idle done")
        if args.idle_rounds:
            phases["idle, in rounds"] = _rounds(server, key, users, until=lambda: False, cap=args.idle_rounds)
            log("idle, in rounds done")
        for name in args.variants.split(","):
            _queue_backlog(args.backlog, spare=(heavy, typical))
            log(f"{name}: {_pending()} texts queued")
            phases[name] = _backlog_phase(server, key, users, db.url, logdir, name, args, drains)
            log(f"{name} done; drained {drains[name]}")
            _clear_queue()
        variants = args.variants.split(",")
        for name, agents in _dream_agents(variants, args.dream_first).items() if args.dream else []:
            phases[f"dream {name}"], drains[f"dream {name}"] = _dream_phase(
                server, key, users, db.url, logdir, name, agents, args.dream_seconds
            )
            log(f"dream {name} done: {drains[f'dream {name}']}")
    finally:
        server.stop()
    _report(args.backlog, phases, drains)
    return 0


if __name__ == "__main__":
    sys.exit(main())
