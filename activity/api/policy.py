"""Activity's part of an agent's ``memoryPolicy`` over REST (:class:`activity.models.ActivityPolicy`): how
long its tool-call log is kept and its LLM budget, both at the top level of ``memoryPolicy``."""

from rest_framework import serializers

from memoryplatform.api.serializers import AsciiIntegerField


def policy_fields() -> dict[str, serializers.Field]:
    """Activity's fields of ``memoryPolicy``."""
    return {
        "toolCallRetentionDays": AsciiIntegerField(
            source="tool_call_retention_days",
            min_value=0,
            max_value=36500,
            required=False,
            help_text="Days the agent's tool-call log is kept (Dream deletes older calls); "
            "0 keeps it forever.",
        ),
        "llmBudget": serializers.DecimalField(
            source="llm_budget",
            max_digits=8,
            decimal_places=2,
            min_value=0,
            allow_null=True,
            coerce_to_string=False,
            required=False,
            help_text="Dollars the agent's LLM calls may spend in any window of LLM_BUDGET_WINDOW seconds, "
            "at every door (extraction, Dream's summaries and confirmations); null: the server's "
            "LLM_BUDGET_PER_AGENT.",
        ),
    }
