"""``make run`` from a fresh clone, and on a restart, side by side (issue 57): for each revision, a
``git clone`` of the repository checked out at it; ``make run`` there (install, migrate a new embedded
PostgreSQL in the clone's ``var/``, collectstatic, bootstrap, serve) on a free port, timed from the start to
the first 200 of ``/readyz``; then Ctrl-C (SIGINT to its process group, as a terminal sends it), and a look
for anything of the clone still running (its uvicorn, Celery, scheduler or PostgreSQL processes); then the
same again in the same clone (the restart). Sides alternate, round by round.

    .venv/bin/python -m bench.clone_start /work/main before=<commit> after=main [--rounds 2] [--root /tmp]

The environment's DATA_DIR, DATABASE_URL, DATABASE_REPLICA_URL and REDIS_URL are removed, as on a fresh
machine. pip's cache is the machine's: every side's install reads the same mirror and cache.
"""

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.startup import answered, free_port

_UNSET = ("DATA_DIR", "DATABASE_URL", "DATABASE_REPLICA_URL", "REDIS_URL")


def _ours(clone: Path) -> list[str]:
    """Processes whose command line or working directory is in ``clone``: pid and command line."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if str(clone) in argv or cwd == str(clone) or cwd.startswith(f"{clone}/"):
            found.append(f"{entry.name} {argv[:120]}")
    return found


def make_run(clone: Path, log: Path) -> dict[str, object]:
    """One ``make run`` in ``clone`` to its first ``/readyz`` 200, then Ctrl-C. Returns the seconds to ready,
    the seconds from SIGINT to ``make``'s exit, and what of the clone was still running 10 s after it
    (which is then stopped)."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in _UNSET}
    started = time.monotonic()
    with log.open("a") as out:
        run = subprocess.Popen(  # noqa: S603 (fixed arguments)
            ["make", "run", f"PORT={port}"],  # noqa: S607 (make from PATH, as a user runs it)
            cwd=clone,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        while answered(f"http://127.0.0.1:{port}/readyz") != 200:
            if run.poll() is not None:
                raise SystemExit(f"make run in {clone} exited with {run.returncode}; see {log}")
            time.sleep(0.1)
        ready = time.monotonic() - started
    finally:
        interrupted = time.monotonic()
        os.killpg(run.pid, signal.SIGINT)
        try:
            run.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()
    stopped = time.monotonic() - interrupted
    deadline = time.monotonic() + 10
    left = _ours(clone)
    while left and time.monotonic() < deadline:
        time.sleep(0.5)
        left = _ours(clone)
    for process in left:  # reported, then stopped: the next run starts clean
        os.kill(int(process.split()[0]), signal.SIGTERM)
    return {"ready": ready, "stopped": stopped, "left": left, "exit": run.returncode}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("repo")
    parser.add_argument("sides", nargs="+", help="label=revision")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--root", default=tempfile.gettempdir())
    args = parser.parse_args()
    sides = dict(side.split("=", 1) for side in args.sides)
    results: dict[str, dict[str, list[float]]] = {s: {"fresh": [], "restart": []} for s in sides}
    for round_no in range(1, args.rounds + 1):
        order = list(sides) if round_no % 2 else list(sides)[::-1]
        for side in order:
            clone = Path(args.root) / f"x-{side}-{round_no}"
            subprocess.run(["git", "clone", "-q", args.repo, str(clone)], check=True)  # noqa: S603, S607
            subprocess.run(["git", "-C", str(clone), "checkout", "-q", sides[side]], check=True)  # noqa: S603, S607
            log = clone.with_suffix(".log")
            for kind in ("fresh", "restart"):
                outcome = make_run(clone, log)
                results[side][kind].append(float(str(outcome["ready"])))
                print(
                    f"round {round_no} {side} {kind}: ready {outcome['ready']:.1f} s, make exited "
                    f"{outcome['exit']} {outcome['stopped']:.1f} s after SIGINT, left after it: "
                    f"{outcome['left'] or 'nothing'} (load {os.getloadavg()[0]:.1f})",
                    flush=True,
                )
    print("\n| side | fresh clone to first 200, each | median | restart, each | median |")
    print("|---|---|---|---|---|")
    for side, kinds in results.items():
        fresh, restart = kinds["fresh"], kinds["restart"]
        print(
            f"| {side} | {', '.join(f'{t:.1f}' for t in fresh)} | {statistics.median(fresh):.1f} s | "
            f"{', '.join(f'{t:.1f}' for t in restart)} | {statistics.median(restart):.1f} s |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
