"""The memory store's domain metrics, counted at the service and selector layer, so every door (REST, MCP, the
LLM tools, the admin) is counted the same. prometheus_client adds ``_total`` to counter names; the web
serves them at /metrics. The other memory metrics live beside their code: ``memory_search_fallbacks``
(selectors), ``memory_embeddings_pending``, ``memory_entries_embedded`` and ``memory_embedding_failures``
(embedding)."""

from collections import Counter as Counter_
from collections.abc import Iterable

from django.db import transaction
from prometheus_client import Counter

upserts = Counter(
    "memory_upserts",
    "Memory entries asked of an upsert (one entry, a batch, the legacy properties), by result: created, "
    "updated or skipped (time order: the stored value was observed later). Counted once committed.",
    ["result"],
)
searches = Counter(
    "memory_searches", "Per-user memory searches, by mode (keyword, semantic, hybrid).", ["mode"]
)
recalls = Counter(
    "memory_recalls",
    "Recalls of the entries visible to an agent, by kind: most_recent, most_accessed (the recall order), "
    "relevance (with q) or as_of (from history).",
    ["kind"],
)


def count_upserts(results: Iterable[str]) -> None:
    """Count upserts by result once the transaction that wrote them commits (a rolled back batch counts
    nothing)."""
    counts = Counter_(results)

    def count() -> None:
        for result, n in counts.items():
            upserts.labels(result=result).inc(n)

    transaction.on_commit(count)
