"""Extraction's part of an agent's ``memoryPolicy`` over REST: ``extractionConfig``
(:class:`extraction.models.ExtractionPolicy`)."""

from rest_framework import serializers

from memoryplatform.api.serializers import StrictInput
from usermemory.models import Visibility


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


def policy_fields() -> dict[str, serializers.Field]:
    """Extraction's fields of ``memoryPolicy`` (optional: EDDI's shape has no extractionConfig)."""
    return {"extractionConfig": ExtractionConfigSerializer(source="*", required=False)}
