"""The staff overview's numbers about memories, each cheap on a table of millions of rows: the planner's
estimates where a count would scan the table, exact counts where an index bounds them."""

from typing import Any

from django.utils import timezone

from memoryplatform import store
from memoryplatform.embeddings.store import queue_backlog
from usermemory.conflicts import conflict_sets_open
from usermemory.embedding import ENTRIES
from usermemory.models import MemoryEntry

EXACT_BELOW = 10_000  # a table the planner says is smaller (or never analysed) is counted, up to this


def _rows(model: Any) -> tuple[int, bool]:
    """A table's rows and whether the number is exact: counted up to EXACT_BELOW, else the estimate."""
    counted = model.objects.all()[: EXACT_BELOW + 1].count()
    if counted <= EXACT_BELOW:
        return counted, True
    estimate = store.table_estimate(table=model._meta.db_table)
    return (estimate if estimate is not None else counted), False


def memory_overview() -> dict[str, Any]:
    """Entries, users, open conflicts (the sets the Conflicts page lists:
    :func:`usermemory.conflicts.conflict_sets_open`) and embeddings pending: the entries the vector queue
    holds, and how long the oldest has waited (seconds; a vector of an old model is not counted:
    ``manage.py embed --missing`` finds those)."""
    entries, exact = _rows(MemoryEntry)
    if exact:
        users = MemoryEntry.objects.values("user_id").distinct().count()
    else:
        table = MemoryEntry._meta.db_table
        users = store.distinct_estimate(table=table, column="user_id") or 0
    backlog = queue_backlog(queue=ENTRIES.queue)
    return {
        "entries": entries,
        "users": users,
        "exact": exact,
        "openConflicts": conflict_sets_open(),
        "embeddingsPending": backlog.pending,
        "embeddingsOldestSeconds": (
            max(int((timezone.now() - backlog.oldest).total_seconds()), 0) if backlog.oldest else None
        ),
    }
