"""What the scheduled re-embedding's pass costs when it finds nothing to do (issue 31: does it grow with the
table?). On the data ``bench.load`` left (every entry with a vector of the configured model):

    DATA_DIR=/work/data-10m env -u DATABASE_URL .venv/bin/python -m bench.reembed_scan [--rounds 3]

Times, per round: the full scan the pass made before a complete pass was recorded (the count of entries
pending, then the first batch, as ``memoryplatform.embeddings.jobs.embed_missing`` starts), and the pass as it
is now once one has been recorded (``reembed_scheduled``: one look at the sweep record per kind).
"""

import argparse
import os
import sys
import time

from bench import target
from bench.measure import log


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--db-url", default=os.environ.get("DATABASE_URL", ""))
    args = parser.parse_args(argv)
    db = target.resolve(args.db_url)
    target.django_setup(db)
    from django.conf import settings
    from django.core.management import call_command

    from memoryplatform.embeddings import get_embedder
    from memoryplatform.embeddings.jobs import reembed_scheduled, registered
    from memoryplatform.embeddings.store import sweep_done
    from usermemory.models import MemoryEntry
    from usermemory.sql import vectors

    call_command("migrate", verbosity=0)
    embedder = get_embedder()
    if embedder is None:
        raise SystemExit("EMBEDDINGS_PROVIDER is 'none': nothing to scan for.")
    model = embedder.model_id
    entries = MemoryEntry.objects.count()
    print(f"\n{entries:,} entries; model {model}\n")
    print("| round | count pending s | first batch s | scan in all s | pending | pass now s | its status |")
    print("|---|---|---|---|---|---|---|")
    for kind in registered():  # recorded as the pass that reaches the end records it
        sweep_done(kind=kind.lock_key, model=model)
    for round_ in range(1, args.rounds + 1):
        started = time.perf_counter()
        pending = vectors.embeddings_pending_count(model=model)
        counted = time.perf_counter() - started
        started = time.perf_counter()
        vectors.embeddings_pending(model=model, ids=None, after=0, limit=settings.EMBEDDINGS_BATCH_SIZE)
        batch = time.perf_counter() - started
        started = time.perf_counter()
        status = reembed_scheduled(batch_size=settings.EMBEDDINGS_BATCH_SIZE, seconds=60)
        now = time.perf_counter() - started
        print(
            f"| {round_} | {counted:.2f} | {batch:.2f} | {counted + batch:.2f} | {pending} | {now:.4f} | "
            f"{status} |"
        )
        log(f"round {round_} done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
