"""Recall before and after a Dream cycle with summaries on (issue 56): a summary consolidates, never buries.

    env -u DATABASE_URL .venv/bin/python -m bench.dream_recall ../shared/data/user-facts/dev.json \\
        [--min-entries 2] [--out /tmp/dream-recall.json]

The stores of a user-facts set (:mod:`bench.small_stores`: a handful of facts a user, keys descriptive,
numbered or opaque, questions worded apart from the facts) are written through the service and embedded, and
recall is measured through REST (hit@1, hit@3, the fact kept at the default threshold, off-topic questions
that find nothing). Then one Dream cycle runs (``manage.py dream``, in process) with summaries on for the
agent, at ``--min-entries`` (the smallest set a summary takes; 2, the most a cycle can consolidate) and one
summary a set, answered by :mod:`bench.extraction`'s scripted model (one summary of every entry it is sent,
their texts joined: nothing lost, so what changes is which entries are grouped). Recall is measured again: a
fact a summary superseded counts as found where its summary is. Reported: both tables, the entries
superseded and the summaries written. Nothing is fitted to the data; the data stays outside the project.
"""

import argparse
import io
import json
import os
from contextlib import contextmanager
from pathlib import Path

from bench.extraction import _llm_env
from bench.recall_quality import AGENT, Platform
from bench.small_stores import ask, load, log, report, write

DB_NAME = "bench_dream_recall"


def dream_cycle(*, min_entries: int) -> dict[str, int]:
    """One cycle, summaries on for the bench's agent (no pruning); the run's counts."""
    from django.core.management import call_command

    from dream.models import DreamRun
    from usermemory.services import policy_update

    policy_update(
        agent_id=AGENT,
        dream_enabled=True,
        prune_stale_after_days=0,
        summarize_interactions=True,
        summarize_min_entries=min_entries,
        summarize_target_entries=1,
    )
    call_command("dream", "--no-progress", stdout=io.StringIO())
    run = DreamRun.objects.latest("id")
    return {
        "entriesSummarized": run.entries_summarized,
        "summariesWritten": run.summaries_written,
        "contradictionsFound": run.contradictions_found,
        "failures": run.summarization_failures,
    }


def holders() -> dict[tuple[str, str], str]:
    """(user, key) -> the key of the summary that superseded that entry."""
    from usermemory.models import MemoryEntry

    superseded = MemoryEntry.objects.filter(superseded_by__isnull=False).select_related("superseded_by")
    return {(e.user_id, e.key): e.superseded_by.key for e in superseded if e.superseded_by is not None}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("data", type=Path, nargs="+")
    parser.add_argument(
        "--db-url", default="", help="a PostgreSQL server (default: DATABASE_URL, or embedded)"
    )
    parser.add_argument("--min-entries", type=int, default=2, help="summarizeMinEntries of the cycle")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    users = [user for path in args.data for user in load(path)]
    with contextmanager(_llm_env)(True):  # the scripted model's settings, before Django reads them
        platform = Platform(args.db_url or os.environ.get("DATABASE_URL", ""), name=DB_NAME)
        log(f"{len(users)} users, {sum(len(u.facts) for u in users)} facts; writing and embedding")
        write(platform, users)
        before = ask(platform, users, None)
        log("before: measured; one Dream cycle with summaries on")
        counts = dream_cycle(min_entries=args.min_entries)
        after = ask(platform, users, None, holder=holders())
    print("## before the cycle\n\n" + report(before, "the default"))
    print(f"\n## after the cycle ({json.dumps(counts)})\n\n" + report(after, "the default"))
    if args.out:
        rows = {
            "before": {s: t.row() for s, t in before.items()},
            "after": {s: t.row() for s, t in after.items()},
        }
        args.out.write_text(json.dumps({**rows, "cycle": counts}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
