"""How fast ``manage.py import`` writes: a 10,000-line file through the real command, phase by phase.

    env -u DATABASE_URL .venv/bin/python -m bench.import_rate [--lines 10000] [--users 200]

On one fresh database ``bench_import`` (the embedded server of DATA_DIR, or ``--db-url`` / DATABASE_URL with
its name replaced), with ``bench.data``'s memories (values of 100-300 characters; 60 % self, 20 % group, 20 %
global, written by 10 agents, each in two groups; the agents' caps raised so that no line is evicted or
refused), each phase runs ``manage.py import`` as a process of its own on a file of its own users (so each
writes new entries), and is timed from start to exit. A run of the command on an empty file (Django's start,
the embedded server's connection) is timed first and taken off each phase, so the rates are the import's:

- ``batch 100``: the default, ``EMBEDDINGS_PROVIDER=none`` (the write path alone);
- ``rerun``: the same file again: every line skipped;
- ``batch 1``: a transaction a line;
- ``batch 1000``;
- ``batch 100 + local embedder``: the default embedder; each entry is queued for the vector consumer in its
  batch's transaction (none runs here, so every vector is still pending after the phase: counted), and values
  this long are not embedded in the command's process at all.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import data, target

DB_NAME = "bench_import"
N_AGENTS = 10
PHASES: list[tuple[str, list[str], dict[str, str], str]] = [
    # name, options, environment, the file's users (a phase that reuses a file reruns it)
    ("batch 100", ["--batch-size", "100"], {"EMBEDDINGS_PROVIDER": "none"}, "a"),
    ("rerun (all skipped)", ["--batch-size", "100"], {"EMBEDDINGS_PROVIDER": "none"}, "a"),
    ("batch 1", ["--batch-size", "1"], {"EMBEDDINGS_PROVIDER": "none"}, "b"),
    ("batch 1000", ["--batch-size", "1000"], {"EMBEDDINGS_PROVIDER": "none"}, "c"),
    ("batch 100 + local embedder", ["--batch-size", "100"], {"EMBEDDINGS_PROVIDER": "local"}, "d"),
]


def prepare(db_url: str) -> target.Target:
    db = target.resolve(db_url, name=DB_NAME)
    target.create(db, reset=True)
    target.django_setup(db)
    from django.core.management import call_command

    from apikeys.services import agent_create
    from usermemory import services

    call_command("migrate", verbosity=0, interactive=False)
    for agent, groups in data.agent_groups(N_AGENTS).items():
        agent_create(agent_id=agent, group_ids=groups)
        services.policy_update(agent_id=agent, max_entries_per_user=100_000)
    return db


def write_file(path: Path, *, prefix: str, lines: int, users: int) -> None:
    with path.open("w") as out:
        for memory in data.memories(n_memories=lines, n_users=users, n_agents=N_AGENTS):
            line: dict[str, object] = {
                "userId": f"{prefix}-{memory.user_id}",
                "key": memory.key,
                "value": memory.text,
                "category": memory.category,
                "visibility": memory.visibility,
            }
            if memory.source_agent_id:
                line["sourceAgentId"] = memory.source_agent_id
            if memory.group_ids:
                line["groupIds"] = memory.group_ids
            if memory.source_conversation_id:
                line["sourceConversationId"] = memory.source_conversation_id
            out.write(json.dumps(line) + "\n")


def run_import(
    db: target.Target, path: Path, options: list[str], env: dict[str, str], *, checkout: Path = target.ROOT
) -> tuple[float, str]:
    """``manage.py import`` of ``checkout`` (this one by default) on ``path``: its wall time and summary."""
    argv = [sys.executable, "manage.py", "import", str(path), "--no-progress", "--agent", "agent-00"]
    argv += options
    started = time.monotonic()
    done = subprocess.run(  # noqa: S603 (our own interpreter and manage.py, fixed arguments)
        argv,
        cwd=checkout,
        env=os.environ | {"DATABASE_URL": db.url, "PYTHONPATH": str(checkout)} | env,
        capture_output=True,
        text=True,
    )
    wall = time.monotonic() - started
    if done.returncode:
        raise RuntimeError(f"import failed: {done.stderr[-2000:]}")
    return wall, done.stdout.strip().splitlines()[-1]


def missing_vectors(prefix: str) -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM usermemory_memoryentry m WHERE m.user_id LIKE %(users)s AND NOT EXISTS "
            "(SELECT 1 FROM usermemory_entryembedding e WHERE e.entry_id = m.id)",
            {"users": f"{prefix}-%"},
        )
        return int(cursor.fetchone()[0])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--lines", type=int, default=10_000)
    parser.add_argument("--users", type=int, default=200)
    parser.add_argument("--db-url", default=os.environ.get("DATABASE_URL", ""))
    parser.add_argument("--phases", default="", help="the phases to run, by name, comma-separated (all)")
    parser.add_argument(
        "--checkout",
        action="append",
        type=Path,
        default=[],
        help="repeatable: run each phase with this checkout's manage.py too (a before/after, side by side)",
    )
    args = parser.parse_args(argv)
    wanted = {name.strip() for name in args.phases.split(",") if name.strip()}
    checkouts = [target.ROOT, *args.checkout]
    db = prepare(args.db_url)
    folder = Path(tempfile.mkdtemp(prefix="import-rate-"))
    try:
        empty = folder / "empty.jsonl"
        empty.write_text("")
        start, _ = run_import(db, empty, [], {"EMBEDDINGS_PROVIDER": "none"})
        print(f"load average {os.getloadavg()[0]:.1f}; the command's start (an empty file): {start:.2f} s")
        print("| phase | lines | wall s | import s | lines/s | report |\n|---|---|---|---|---|---|")
        for name, options, env, users in PHASES:
            if wanted and name not in wanted:
                continue
            for number, checkout in enumerate(checkouts):
                prefix = f"{users}{number}"
                path = folder / f"{prefix}.jsonl"
                if not path.exists():
                    write_file(path, prefix=prefix, lines=args.lines, users=args.users)
                wall, report = run_import(db, path, options, env, checkout=checkout)
                took = max(wall - start, 1e-9)
                extra = ""
                if env["EMBEDDINGS_PROVIDER"] != "none":
                    extra = f"; {missing_vectors(prefix)} entries left without a vector at exit"
                rate = args.lines / took
                label = name if number == 0 else f"{name} ({checkout.name})"
                print(f"| {label} | {args.lines} | {wall:.1f} | {took:.1f} | {rate:.0f} | {report}{extra} |")
        print(f"load average {os.getloadavg()[0]:.1f} at the end")
    finally:
        target.drop(db)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
