"""Dream's Prometheus metrics, in the default registry of the process that runs the cycle.

The web process serves them at /metrics (django-prometheus); a Celery worker's, beside ``manage.py serve``,
through the web's /metrics in multiprocess mode (see memoryplatform/management/commands/serve.py), or as a
service of its own on ``WORKER_METRICS_PORT``. prometheus_client adds ``_total`` to counter names.
"""

from prometheus_client import Counter, Histogram

users_processed = Counter(
    "dream_users_processed", "Users whose memories a Dream cycle examined, summed over cycles."
)
entries_pruned = Counter("dream_entries_pruned", "Memory entries deleted by Dream's stale pruning.")
contradictions_found = Counter(
    "dream_contradictions_found", "(user, key) sets Dream newly flagged as holding more than one value."
)
entries_summarized = Counter(
    "dream_entries_summarized", "Memory entries superseded by a Dream summary (kept, hidden from reads)."
)
summarization_failed = Counter(
    "dream_summarization_failed",
    "Groups Dream could not summarise: the LLM failed, timed out or answered outside the schema.",
)
llm_cost_dollars = Counter("dream_llm_cost_dollars", "Dollars Dream spent on LLM calls, from their usage.")
cycles_failed = Counter("dream_cycles_failed", "Dream cycles that ended with an error.")
duration_seconds = Histogram(
    "dream_duration_seconds",
    "Wall time of Dream cycles that ran (skipped and dry runs excluded).",
    buckets=(0.1, 0.5, 1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, float("inf")),
)
