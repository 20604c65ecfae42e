"""Dream's part of an agent's ``memoryPolicy`` over REST: ``dreamConfig`` (the fields of
:class:`dream.models.DreamPolicy`, and usermemory's ``semanticContradictionThreshold``, which extraction
reads too). A new pass's settings are added here; :mod:`usermemory.api.policy` places the part in
``memoryPolicy`` (:data:`dream.passes.DREAM_POLICY` names this module)."""

from rest_framework import serializers

from memoryplatform.api.serializers import AsciiIntegerField, StrictInput
from usermemory.models import SummarizeGroupBy


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


def policy_fields() -> dict[str, serializers.Field]:
    """Dream's fields of ``memoryPolicy``."""
    return {"dreamConfig": DreamConfigSerializer(source="*")}
