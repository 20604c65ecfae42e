"""One Dream cycle over the bench's data, timed (issue 31's table: Dream's cycle at 1M and 10M memories).

    DATA_DIR=/work/data-10m env -u DATABASE_URL .venv/bin/python -m bench.dream_cycle [--agents 5 --first 11]

Dream is turned on for ``--agents`` agents from ``agent-<first>`` on (``agent-00`` is the one the other
benches read as; ``background_load``'s Dream phases use agents 01-10): stale pruning (of a share of their
entries), contradictions, and summaries (each group of 3 or more entries becomes one, the LLM calls answered
by ``bench.extraction``'s scripted OpenAI-compatible server). One ``manage.py dream`` runs in a process of its
own at the defaults (``BACKGROUND_NICE``), then Dream is turned off again. Reported: the entries in scope
(those the agents wrote), the cycle's wall time, its counts, and the seconds per 100,000 entries in scope,
which stays flat if the cycle grows with the agents' data and not with the table's. The cycle changes the data
(it prunes and summarises): reload before measuring again.

``background_load`` uses :func:`dream_process` for its Dream phases.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from bench import data, target
from bench.measure import log


def stale_days() -> int:
    """Days after which an entry is stale, so that only some of the generator's are: it dates them over the
    year before ``bench.data.NOW`` (this cut, half a year back, leaves about 7 % of an agent's entries stale,
    since reads since then count too); the default's 90 days would prune them all, leaving nothing for the
    other passes."""
    return (datetime.now(UTC) - data.NOW).days + 183


def dream_policies(agents: list[str], *, enabled: bool, contradictions: bool = True) -> None:
    """Dream on or off for these agents: pruning (of some: :func:`stale_days`), contradictions (unless
    told not to), and summaries (each group of 3 or more becomes one, by the scripted LLM)."""
    from usermemory.services import policy_update

    for agent in agents:
        policy_update(
            agent_id=agent,
            dream_enabled=enabled,
            detect_contradictions=contradictions,
            prune_stale_after_days=stale_days(),
            summarize_interactions=enabled,
            summarize_min_entries=3,
            summarize_target_entries=1,
        )


@contextmanager
def dream_process(
    db_url: str,
    agents: list[str],
    log_path: Path,
    env: Mapping[str, str] = {},
    *,
    contradictions: bool = True,
    prefix: Sequence[str] = (),
) -> Iterator[subprocess.Popen[bytes]]:
    """Dream on for ``agents``, and one ``manage.py dream`` started in a process of its own (``env`` added to
    its environment) with the scripted LLM; on leaving, it is waited for and Dream is off again."""
    from bench.extraction import SCRIPTED_MODEL, scripted_llm

    dream_policies(agents, enabled=True, contradictions=contradictions)
    try:
        with scripted_llm() as url, log_path.open("w") as out:
            variables = os.environ | dict(env)
            variables |= {"DATABASE_URL": db_url, "LLM_PROVIDER": "openai", "LLM_URL": url}
            variables["LLM_MODEL"] = SCRIPTED_MODEL
            argv = [*prefix, sys.executable, str(target.ROOT / "manage.py"), "dream", "--no-progress"]
            process = subprocess.Popen(  # noqa: S603 (our own interpreter, fixed arguments)
                argv,
                cwd=target.ROOT,
                env=variables,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            try:
                yield process
            finally:
                process.wait(timeout=7200)
    finally:
        dream_policies(agents, enabled=False)


def dream_counts(log_path: Path) -> str:
    """The cycle's outcome and counts, from what ``manage.py dream`` printed."""
    said = [line.strip() for line in log_path.read_text().splitlines()]
    return "; ".join(line for line in said if line.startswith(("entries ", "contradictions", "Dream run")))


def _in_scope(agents: list[str]) -> int:
    from usermemory.models import MemoryEntry

    return MemoryEntry.objects.filter(source_agent_id__in=agents).count()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--agents", type=int, default=5, help="agents with Dream on")
    parser.add_argument(
        "--first", type=int, default=11, help="the first of them (agent-11 on: background_load's are 01-10)"
    )
    parser.add_argument(
        "--contradictions",
        action="store_true",
        help="contradictions too (by meaning: every distinct key of the users in scope is embedded once per "
        "model, hours on the bench's 1M data, whose keys are nearly all distinct; later cycles read them)",
    )
    parser.add_argument(
        "--cycles", type=int, default=1, help="cycles one after another (the second finds the keys embedded)"
    )
    parser.add_argument("--db-url", default=os.environ.get("DATABASE_URL", ""))
    args = parser.parse_args(argv)
    db = target.resolve(args.db_url)
    target.django_setup(db)
    from django.core.management import call_command

    from usermemory.models import MemoryEntry

    call_command("migrate", verbosity=0)
    agents = [f"agent-{i:02d}" for i in range(args.first, args.first + args.agents)]
    table = MemoryEntry.objects.count()
    scope = _in_scope(agents)
    log(f"{table} entries, {scope} of them written by {agents[0]}..{agents[-1]}")
    rows, failed = [], False
    for cycle in range(1, args.cycles + 1):
        log_path = Path(tempfile.mkdtemp(prefix="dream-cycle-")) / "dream.log"
        started = time.monotonic()
        with dream_process(db.url, agents, log_path, contradictions=args.contradictions) as process:
            pass
        took = time.monotonic() - started
        failed = failed or process.returncode != 0
        rows.append(
            f"| {cycle} | {table:,} | {scope:,} | {len(agents)} | {took:.1f} | "
            f"{took / scope * 100_000:.1f} | {process.returncode} | {dream_counts(log_path)} |"
        )
        log(f"cycle {cycle}: {took:.1f} s")
    print("\n| cycle | entries | in scope | agents | cycle s | s per 100k in scope | exit | outcome |")
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
