"""Extraction's Prometheus metrics (served as Dream's are: see dream/metrics.py)."""

from prometheus_client import Counter

facts = Counter(
    "extraction_facts",
    "Facts extracted from conversations, by the operation decided: add, update, noop, rejected, skipped "
    "(time order: the stored value was observed after the fact's message).",
    ["op"],
)
cost_dollars = Counter(
    "extraction_llm_cost_dollars", "Dollars extraction spent on LLM calls, from their usage."
)
failures = Counter(
    "extraction_failures",
    "Extractions that changed nothing: the LLM failed, timed out or gave an answer that was refused.",
)
skipped = Counter(
    "extraction_skipped",
    "Background batches passed over without a call: their prompt alone would cost more than the agent's "
    "maxExtractionCostPerRun.",
)
