"""An agent's memory policy over REST (EDDI's ``userMemoryConfig`` shape under ``memoryPolicy``): usermemory's
caps, recall and guardrails, the fields each other app's policy part brings (Dream's and extraction's
settings, activity's retention and budget), and the agent's directory entry with it."""

import functools
from typing import Any

from django.apps import apps
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string
from rest_framework import serializers

from apikeys.api.serializers import AgentOutputSerializer
from memoryplatform.api.serializers import AsciiIntegerField, StrictInput
from usermemory.models import MAX_KEY_CHARS, OnCapReached, RecallOrder
from usermemory.policies import policy_parts


class GuardrailsSerializer(StrictInput):
    maxKeyLength = AsciiIntegerField(source="max_key_length", min_value=1, max_value=MAX_KEY_CHARS)
    maxValueLength = AsciiIntegerField(source="max_value_length", min_value=1, max_value=100_000)
    maxWritesPerTurn = AsciiIntegerField(source="max_writes_per_turn", min_value=1, max_value=10_000)
    allowedCategories = serializers.ListField(
        source="allowed_categories", child=serializers.CharField(max_length=64)
    )


def _memory_policy_fields() -> dict[str, serializers.Field]:
    """Usermemory's fields of ``memoryPolicy``, in the contract's order: the other parts' come after."""
    return {
        "maxEntriesPerUser": AsciiIntegerField(
            source="max_entries_per_user", min_value=1, max_value=1_000_000
        ),
        "maxRecallEntries": AsciiIntegerField(source="max_recall_entries", min_value=1, max_value=1000),
        "recallTopK": AsciiIntegerField(
            source="recall_top_k",
            min_value=1,
            max_value=1000,
            help_text="A recall by relevance returns the best this many (at most maxRecallEntries), no score "
            "cut unless minScore is given.",
        ),
        "recallOrder": serializers.ChoiceField(source="recall_order", choices=RecallOrder.choices),
        "onCapReached": serializers.ChoiceField(source="on_cap_reached", choices=OnCapReached.choices),
        "guardrails": GuardrailsSerializer(source="*"),
    }


@functools.cache
def memory_policy_serializer() -> type[StrictInput]:
    """``MemoryPolicySerializer``: EDDI's ``userMemoryConfig`` shape, read and (partially) written.

    Its fields are usermemory's, then each registered policy part's (:mod:`usermemory.policies`; Dream's
    ``dreamConfig``, extraction's ``extractionConfig``, activity's ``toolCallRetentionDays`` and
    ``llmBudget``), each part's REST fields named by its ``rest`` path. It reads and writes the policy as one
    flat document (:func:`usermemory.selectors.policy_values`), so a field's source is its field name
    whichever table holds it. Made once, on first use: after every app's ``ready()`` has registered its
    part (this module is imported by the URL map, never while the apps load)."""
    if not apps.ready:
        raise ImproperlyConfigured("memoryPolicy's serializer is made before every app registered its part.")
    fields = _memory_policy_fields()
    for part in policy_parts():
        if part.rest:
            fields.update(import_string(part.rest)())
    attrs: dict[str, Any] = {
        "__module__": __name__,
        "__doc__": "EDDI's ``userMemoryConfig`` shape, read and (partially) written.",
        **fields,
    }
    return type("MemoryPolicySerializer", (StrictInput,), attrs)


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

    memoryPolicy = memory_policy_serializer()(source="*", read_only=True)

    class Meta(AgentOutputSerializer.Meta):
        fields = [*AgentOutputSerializer.Meta.fields, "memoryPolicy"]
