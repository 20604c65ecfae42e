"""An agent's memory policy over REST (EDDI's ``userMemoryConfig`` shape under ``memoryPolicy``): its
guardrails, its Dream and extraction settings, and the agent's directory entry with it."""

from typing import Any

from rest_framework import serializers

from apikeys.api.serializers import AgentOutputSerializer
from memoryplatform.api.serializers import AsciiIntegerField, StrictInput
from usermemory.models import MAX_KEY_CHARS, OnCapReached, RecallOrder, SummarizeGroupBy, Visibility


class GuardrailsSerializer(StrictInput):
    maxKeyLength = AsciiIntegerField(source="max_key_length", min_value=1, max_value=MAX_KEY_CHARS)
    maxValueLength = AsciiIntegerField(source="max_value_length", min_value=1, max_value=100_000)
    maxWritesPerTurn = AsciiIntegerField(source="max_writes_per_turn", min_value=1, max_value=10_000)
    allowedCategories = serializers.ListField(
        source="allowed_categories", child=serializers.CharField(max_length=64)
    )


class DreamConfigSerializer(StrictInput):
    enabled = serializers.BooleanField(source="dream_enabled")
    pruneStaleAfterDays = AsciiIntegerField(source="prune_stale_after_days", min_value=0, max_value=36500)
    pruneExpiredAfterDays = AsciiIntegerField(
        source="prune_expired_after_days",
        min_value=0,
        max_value=36500,
        required=False,
        help_text="Days an entry past its validTo is kept before Dream deletes it (its history stays); "
        "0 keeps it.",
    )
    detectContradictions = serializers.BooleanField(source="detect_contradictions")
    summarizeInteractions = serializers.BooleanField(source="summarize_interactions")
    maxCostPerRun = serializers.DecimalField(
        source="max_cost_per_run", max_digits=8, decimal_places=2, min_value=0, coerce_to_string=False
    )
    crossAgentMaintenance = serializers.BooleanField(source="cross_agent_maintenance")
    summarizeMinEntries = AsciiIntegerField(source="summarize_min_entries", min_value=2, max_value=10_000)
    summarizeTargetEntries = AsciiIntegerField(source="summarize_target_entries", min_value=1, max_value=1000)
    summarizeGroupBy = serializers.ChoiceField(source="summarize_group_by", choices=SummarizeGroupBy.choices)
    preserveAgentProvenance = serializers.BooleanField(source="preserve_agent_provenance")
    summarizeRequiresApproval = serializers.BooleanField(source="summarize_requires_approval")
    semanticContradictionThreshold = serializers.FloatField(
        source="semantic_contradiction_threshold", min_value=0.01, max_value=1.0
    )
    confirmContradictionsWithLlm = serializers.BooleanField(source="confirm_contradictions_with_llm")
    maxLlmCallsPerRun = AsciiIntegerField(
        source="max_llm_calls_per_run",
        min_value=0,
        max_value=100_000,
        required=False,
        help_text="LLM calls one Dream cycle may make in all (summaries, confirmations), whatever they cost.",
    )
    maxLlmCallsPerUser = AsciiIntegerField(
        source="max_llm_calls_per_user",
        min_value=0,
        max_value=10_000,
        required=False,
        help_text="LLM calls one Dream cycle may make about one user.",
    )


class ExtractionConfigSerializer(StrictInput):
    extractFromConversations = serializers.BooleanField(
        source="extract_from_conversations",
        required=False,
        help_text="Extract facts in the background from the conversations the agent takes part in.",
    )
    maxExtractionCostPerRun = serializers.DecimalField(
        source="max_extraction_cost_per_run",
        max_digits=8,
        decimal_places=2,
        min_value=0,
        coerce_to_string=False,
        required=False,
        help_text="Dollars of LLM calls one background extraction run may spend for the agent.",
    )
    visibility = serializers.ChoiceField(
        source="extraction_visibility",
        choices=Visibility.choices,
        required=False,
        help_text="An extracted fact's visibility when the request names none; the most a fact from a "
        "conversation without a group gets.",
    )


class MemoryPolicySerializer(StrictInput):
    """EDDI's ``userMemoryConfig`` shape, read and (partially) written."""

    maxEntriesPerUser = AsciiIntegerField(source="max_entries_per_user", min_value=1, max_value=1_000_000)
    maxRecallEntries = AsciiIntegerField(source="max_recall_entries", min_value=1, max_value=1000)
    recallOrder = serializers.ChoiceField(source="recall_order", choices=RecallOrder.choices)
    onCapReached = serializers.ChoiceField(source="on_cap_reached", choices=OnCapReached.choices)
    guardrails = GuardrailsSerializer(source="*")
    dreamConfig = DreamConfigSerializer(source="*")
    extractionConfig = ExtractionConfigSerializer(source="*", required=False)
    toolCallRetentionDays = AsciiIntegerField(
        source="tool_call_retention_days",
        min_value=0,
        max_value=36500,
        required=False,
        help_text="Days the agent's tool-call log is kept (Dream deletes older calls); 0 keeps it forever.",
    )
    llmBudget = serializers.DecimalField(
        source="llm_budget",
        max_digits=8,
        decimal_places=2,
        min_value=0,
        allow_null=True,
        coerce_to_string=False,
        required=False,
        help_text="Dollars the agent's LLM calls may spend in any window of LLM_BUDGET_WINDOW seconds, at "
        "every door (extraction, Dream's summaries and confirmations); null: the server's "
        "LLM_BUDGET_PER_AGENT.",
    )


def flatten_policy_changes(data: dict[str, Any]) -> dict[str, Any]:
    """The validated (source-keyed, nested with source='*') data as flat model field changes."""
    flat: dict[str, Any] = {}
    for name, value in data.items():
        if isinstance(value, dict):
            flat.update(value)
        else:
            flat[name] = value
    return flat


class AgentDetailOutputSerializer(AgentOutputSerializer):
    """An agent's directory entry with its memory policy (``GET/PATCH /v1/agents/{id}``)."""

    memoryPolicy = MemoryPolicySerializer(source="*", read_only=True)

    class Meta(AgentOutputSerializer.Meta):
        fields = [*AgentOutputSerializer.Meta.fields, "memoryPolicy"]
