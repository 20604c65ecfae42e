"""Ways to run background work, side by side in one run (issue 48): what each costs a node at rest and how
long a job takes from its enqueue to done.

    DATA_DIR=/tmp/data-bench env -u DATABASE_URL PYTHONPATH=.:/tmp/queues .venv/bin/python \\
        -m bench.background_ways [--jobs 50] [--idle 60]

``/tmp/queues`` holds the candidates that are not dependencies of the platform, installed there only for this
bench: ``pip install --target /tmp/queues --no-deps celery==5.7.0 procrastinate==3.10.0 django-tasks==0.12.0
django-tasks-db==0.13.0`` (their other dependencies are the platform's, or were: kombu, billiard, vine,
redis). Redis must answer on ``REDIS_URL`` (default ``redis://127.0.0.1:6379/0``).

On the bench's database (``bench.load`` left it; the vector job takes an entry of it), every candidate's
processes are started at once, as a user would run them:

- ``loops`` (measured in issue 48; its command loops were deleted in issue 57, when background work moved to
  Celery: run it from a checkout before that): ``manage.py dream_scheduler --supervise``, what ``manage.py
  serve`` started (a supervisor and the scheduler process: Dream's schedule on the main loop, the vector
  consumer on a thread; the re-embedding's loop off, ``EMBEDDINGS_REEMBED_INTERVAL=0``, as its first pass
  would embed what earlier benches left without a vector, and the extraction's off without an LLM: each is one
  more thread asleep); its job is a vector: an entry's vector deleted and the entry queued, with the queue's
  notification, in one transaction (as a write's trigger does), done when its new vector is stored (the local
  model embedding one text is part of it);
- ``celery``: ``celery worker --concurrency 2`` and ``celery beat`` (as docker-compose.yml ran them before
  issue 48; their app, ``bench.celery_app``, loads the platform as the platform's own did) and the Redis
  server; its job is Celery's own no-op task (``celery.accumulate``) sent through
  Redis, done when its result is read back;
- ``procrastinate``: ``procrastinate worker`` on a database of its own in the same server (its schema
  applied), with a no-op task (``bench.background_jobs``); done when its job's row says ``succeeded``;
- ``django-tasks-db``: ``manage.py db_worker`` (django-tasks' database backend, its tables migrated into the
  bench's database, ``bench.tasks_settings``) with the same no-op task; done when its result says so.

Then, all started and warmed up (a first job each), CPU of every candidate's processes (children included)
is read over ``--idle`` seconds with nothing to do, with their memory (PSS, so a prefork pool's shared pages
count once); then ``--jobs`` jobs of each, one at a time. The vector consumer is the same code in every
candidate (the trigger's queue, LISTEN and NOTIFY): in ``loops`` a thread of the scheduler, elsewhere a
process of its own (``manage.py embed --follow``) that the others' figures leave out.
"""

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import target
from bench.measure import log

REDIS = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
QUEUES_DB = "bench_queues"
TICK = os.sysconf("SC_CLK_TCK")


@dataclass
class Candidate:
    name: str
    commands: list[list[str]]
    env: dict[str, str] = field(default_factory=dict)
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    extra_pids: list[int] = field(default_factory=list)  # started by no one here (the Redis server)


def _tree(pids: list[int]) -> list[int]:
    """These processes and every descendant."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], list(pids)
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += children.get(pid, [])
    return found


def _cpu_seconds(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime (children still alive are in the tree)
    return total / TICK


def _pss_mib(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total / 1024


def _pids(candidate: Candidate) -> list[int]:
    return _tree([p.pid for p in candidate.processes] + candidate.extra_pids)


def _redis_pid() -> int:
    import redis

    return int(redis.Redis.from_url(REDIS).info("server")["process_id"])


def _wait(what: str, done: Callable[[], bool], timeout: float = 120.0) -> float:
    """Poll ``done`` every 2 ms until it holds; the seconds it took."""
    started = time.monotonic()
    while not done():
        if time.monotonic() - started > timeout:
            raise RuntimeError(f"{what}: not done in {timeout:.0f} s")
        time.sleep(0.002)
    return time.monotonic() - started


def _vector_job(entry_id: int) -> float:
    """A write's vector job, as its trigger queues it; the seconds from the commit to the vector stored."""
    from django.db import connection, transaction

    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("DELETE FROM usermemory_entryembedding WHERE entry_id = %(id)s", {"id": entry_id})
        cursor.execute(
            "INSERT INTO usermemory_pendingentryvector (entry_id) VALUES (%(id)s) ON CONFLICT DO NOTHING",
            {"id": entry_id},
        )
        cursor.execute("SELECT pg_notify('memoryplatform_vectors', 'usermemory_memoryentry')")

    def stored() -> bool:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT 1 FROM usermemory_entryembedding WHERE entry_id = %(id)s", {"id": entry_id}
            )
            return cursor.fetchone() is not None

    return _wait("vector", stored)


def _celery_job() -> float:
    from bench.celery_app import app

    started = time.monotonic()
    app.send_task("celery.accumulate", args=[1]).get(timeout=60)
    return time.monotonic() - started


class _Procrastinate:
    """procrastinate's app, opened once, and one connection that reads its jobs' status, as a web process
    would hold them."""

    def __init__(self) -> None:
        import psycopg

        from bench.background_jobs import CONNINFO, procrastinate_app

        self.app = procrastinate_app
        self.app.open()
        self.conn = psycopg.connect(CONNINFO, autocommit=True)

    def __call__(self) -> float:
        from bench.background_jobs import procrastinate_noop

        started = time.monotonic()
        job_id = procrastinate_noop.defer()

        def succeeded() -> bool:
            row = self.conn.execute(
                "SELECT status FROM procrastinate_jobs WHERE id = %s", [job_id]
            ).fetchone()
            return row is not None and row[0] == "succeeded"

        _wait("procrastinate", succeeded)
        return time.monotonic() - started


def _embed_alone(entry_ids: list[int]) -> list[float]:
    """Each entry's text embedded in this process by the same local model (one thread, as the consumer's, at
    this process's priority): the part of a vector job that is the model, not the queue."""
    from django.db import connection

    from memoryplatform.embeddings import get_embedder

    embedder = get_embedder()
    assert embedder is not None
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT key || ': ' || value_text FROM usermemory_memoryentry WHERE id = ANY(%(ids)s)",
            {"ids": entry_ids},
        )
        texts = [row[0] for row in cursor.fetchall()]
    embedder.embed_passages(texts[:1])  # the model loads
    took = []
    for text in texts:
        started = time.monotonic()
        embedder.embed_passages([text])
        took.append(time.monotonic() - started)
    return took


def _tasks_db_job() -> float:
    from django_tasks import TaskResultStatus

    from bench.background_jobs import tasks_noop

    started = time.monotonic()
    result = tasks_noop.enqueue()

    def done() -> bool:
        result.refresh()
        return bool(result.status == TaskResultStatus.SUCCESSFUL)

    _wait("django-tasks-db", done)
    return time.monotonic() - started


def _start(candidate: Candidate, logdir: Path) -> None:
    env = os.environ | candidate.env
    for n, argv in enumerate(candidate.commands):
        out = (logdir / f"{candidate.name}-{n}.log").open("w")
        candidate.processes.append(
            subprocess.Popen(  # noqa: S603 (our own interpreter and commands)
                argv, cwd=target.ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        )
        log(f"{candidate.name}: started {' '.join(argv[1:4])} (pid {candidate.processes[-1].pid})")


def _stop(candidate: Candidate) -> None:
    for process in candidate.processes:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
    for process in candidate.processes:
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)


def _queues_url(db_url: str) -> str:
    """A database of its own for procrastinate's schema, in the bench's server (made anew)."""
    import psycopg

    queues = target.resolve(db_url, name=QUEUES_DB)
    with psycopg.connect(queues.admin_conninfo, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {QUEUES_DB}")
        conn.execute(f"CREATE DATABASE {QUEUES_DB}")
    return queues.url


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * share))]


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=50)
    parser.add_argument("--idle", type=float, default=60.0)
    parser.add_argument("--db-url", default=os.environ.get("DATABASE_URL", ""))
    return parser.parse_args(argv)


def _prepare(db_url: str) -> tuple[target.Target, str, list[int]]:
    """Django set up on the bench's database (migrated, procrastinate's schema applied in its own); the
    database, procrastinate's, and the entries the vector jobs take."""
    os.environ["DJANGO_SETTINGS_MODULE"] = "bench.tasks_settings"  # the platform's, with django-tasks-db
    # The model in this process (_embed_alone) as in the consumer: one thread (two spin against each other on
    # a busy node, seconds a text).
    os.environ["OMP_NUM_THREADS"] = "1"
    db = target.resolve(db_url)
    queues = _queues_url(db_url)
    os.environ["PROCRASTINATE_CONNINFO"] = queues
    target.django_setup(db)
    from django.core.management import call_command
    from django.db import connection

    call_command("migrate", verbosity=0)
    from bench.background_jobs import procrastinate_app

    with procrastinate_app.open():
        procrastinate_app.schema_manager.apply_schema()
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM usermemory_pendingentryvector")
        cursor.execute(
            "SELECT v.entry_id FROM usermemory_entryembedding v "
            "JOIN usermemory_memoryentry e ON e.id = v.entry_id ORDER BY v.entry_id LIMIT %(n)s",
            {"n": 200},
        )
        entries = [row[0] for row in cursor.fetchall()]
    return db, queues, entries


def _candidates(db: target.Target, queues: str) -> list[Candidate]:
    manage = str(target.ROOT / "manage.py")
    base = {
        "DATABASE_URL": db.url,
        "DJANGO_SETTINGS_MODULE": "bench.tasks_settings",
        "PROCRASTINATE_CONNINFO": queues,
        "EMBEDDINGS_PROVIDER": "local",
    }
    py = sys.executable
    return [
        Candidate(
            "celery",
            [
                [
                    py,
                    "-m",
                    "celery",
                    "-A",
                    "bench.celery_app",
                    "worker",
                    "--loglevel",
                    "INFO",
                    "--concurrency",
                    "2",
                ],
                [py, "-m", "celery", "-A", "bench.celery_app", "beat", "--loglevel", "INFO", "--schedule"],
            ],
            base | {"REDIS_URL": REDIS},
            extra_pids=[_redis_pid()],
        ),
        Candidate(
            "procrastinate",
            [[py, "-m", "procrastinate", "--app", "bench.background_jobs.procrastinate_app", "worker"]],
            base,
        ),
        Candidate("django-tasks-db", [[py, manage, "db_worker", "--interval", "1"]], base),
    ]


def _measure_idle(candidates: list[Candidate], idle: float, results: dict[str, dict[str, Any]]) -> None:
    """Every candidate's processes, their CPU over ``idle`` seconds with nothing to do, and their PSS, into
    ``results``."""
    time.sleep(5)
    pids = {c.name: _pids(c) for c in candidates}
    before = {name: _cpu_seconds(p) for name, p in pids.items()}
    time.sleep(idle)
    for name, p in pids.items():
        results[name] = {
            "processes": len(p),
            "idle_cpu": (_cpu_seconds(p) - before[name]) / idle * 100,
            "pss": _pss_mib(p),
        }


def _measure_jobs(
    candidates: list[Candidate],
    jobs: dict[str, Callable[[], float]],
    entries: list[int],
    n_jobs: int,
    results: dict[str, dict[str, Any]],
) -> None:
    """``n_jobs`` jobs of each candidate, one at a time, into ``results``."""
    for candidate in candidates:
        name = candidate.name
        job = jobs[name]
        if name == "loops":
            job()  # the model loads at the first vector
            results[name]["pss_model"] = _pss_mib(_pids(candidate))
            ids = [entries[1 + n % (len(entries) - 1)] for n in range(n_jobs)]
            values = [_vector_job(entry_id) for entry_id in ids]
            embed = _embed_alone(ids)
            results[name]["embed"] = embed
            log(f"loops: the model alone, p50 {_percentile(embed, 0.5) * 1000:.1f} ms")
        else:
            values = [job() for _ in range(n_jobs)]
        results[name]["latency"] = values
        log(f"{name}: p50 {_percentile(values, 0.5) * 1000:.1f} ms")


def _print_results(args: argparse.Namespace, logdir: Path, results: dict[str, dict[str, Any]]) -> None:
    print(f"\nBackground work, {args.jobs} jobs one at a time, idle over {args.idle:.0f} s; logs in {logdir}")
    print(
        "\n| candidate | processes | idle CPU % of a core | PSS MiB | job p50 ms | job p95 ms | job max ms |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, r in results.items():
        lat = r.get("latency", [float("nan")])
        pss = f"{r['pss']:.0f}" + (f" ({r['pss_model']:.0f} with the model)" if "pss_model" in r else "")
        p50, p95 = _percentile(lat, 0.5) * 1000, _percentile(lat, 0.95) * 1000
        print(
            f"| {name} | {r['processes']} | {r['idle_cpu']:.2f} | {pss} | {p50:.1f} | {p95:.1f} | "
            f"{max(lat) * 1000:.1f} |"
        )
    if "embed" in results.get("loops", {}):
        embed = results["loops"]["embed"]
        print(
            f"\nloops' job embeds one text: the model alone took "
            f"p50 {_percentile(embed, 0.5) * 1000:.1f} ms, "
            f"p95 {_percentile(embed, 0.95) * 1000:.1f} ms in the bench's process"
        )
    print(f"\nload average at the end: {os.getloadavg()}")


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    db, queues, entries = _prepare(args.db_url)
    candidates = _candidates(db, queues)
    logdir = Path(tempfile.mkdtemp(prefix="background-ways-"))
    candidates[1].commands[1].append(str(logdir / "celerybeat-schedule"))
    jobs: dict[str, Callable[[], float]] = {
        "loops": lambda: _vector_job(entries[0]),
        "celery": _celery_job,
        "procrastinate": _Procrastinate(),
        "django-tasks-db": _tasks_db_job,
    }
    os.environ["REDIS_URL"] = REDIS  # this process sends Celery's jobs through Redis
    results: dict[str, dict[str, Any]] = {}
    try:
        for candidate in candidates:
            _start(candidate, logdir)
        for candidate in candidates:  # ready: a first job done (the loops' before the model loads: see below)
            if candidate.name != "loops":
                log(f"{candidate.name}: first job in {jobs[candidate.name]():.2f} s")
        _measure_idle(candidates, args.idle, results)
        log("idle measured; jobs now")
        _measure_jobs(candidates, jobs, entries, args.jobs, results)
    finally:
        for candidate in candidates:
            _stop(candidate)
    _print_results(args, logdir, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
