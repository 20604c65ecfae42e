"""The staff overview's numbers about memories, each cheap on a table of millions of rows: the planner's
estimates where a count would scan the table, exact counts where an index bounds them."""

from typing import Any

from django.db.models import Count

from memoryplatform import store
from usermemory.models import EntryEmbedding, MemoryEntry

EXACT_BELOW = 10_000  # a table the planner says is smaller (or never analysed) is counted, up to this


def _rows(model: Any) -> tuple[int, bool]:
    """A table's rows and whether the number is exact: counted up to EXACT_BELOW, else the estimate."""
    counted = model.objects.all()[: EXACT_BELOW + 1].count()
    if counted <= EXACT_BELOW:
        return counted, True
    estimate = store.table_estimate(table=model._meta.db_table)
    return (estimate if estimate is not None else counted), False


def memory_overview() -> dict[str, Any]:
    """Entries, users, open conflicts (sets of a user and key: the partial index ``memory_conflicted_idx``
    holds only flagged rows) and embeddings pending (entries without a vector, from the two tables' rows;
    a vector of an old model or text is not counted: ``manage.py embed --missing`` finds those)."""
    entries, exact = _rows(MemoryEntry)
    if exact:
        users = MemoryEntry.objects.values("user_id").distinct().count()
    else:
        table = MemoryEntry._meta.db_table
        users = store.distinct_estimate(table=table, column="user_id") or 0
    vectors, vectors_exact = _rows(EntryEmbedding)
    flagged = MemoryEntry.objects.filter(conflicted=True)
    return {
        "entries": entries,
        "users": users,
        "exact": exact and vectors_exact,
        "conflictedEntries": flagged.count(),
        "conflictKeys": flagged.values("user_id", "key").annotate(n=Count("id")).count(),
        "embeddingsPending": max(entries - vectors, 0),
    }
