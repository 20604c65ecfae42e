"""The extract endpoint's input and output. Input is strict: an unknown field, a number for a string or a
string for a boolean is a 400, never guessed."""

from typing import Any

from rest_framework import serializers

from extraction.extract import MAX_CONTENT_CHARS, ROLES, GivenMessage
from extraction.services import MAX_MESSAGES
from memoryplatform.api.serializers import StrictCharField
from usermemory.models import MAX_KEY_CHARS, Visibility


class StrictBooleanField(serializers.BooleanField):
    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            self.fail("invalid", input=data)
        return data


class StrictSerializer(serializers.Serializer):
    """A serializer that refuses fields it does not declare."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError({name: ["Unknown field."] for name in unknown})
        return super().to_internal_value(data)


class ExtractMessageSerializer(StrictSerializer):
    role = serializers.ChoiceField(choices=[(r, r) for r in ROLES])
    content = StrictCharField(max_length=MAX_CONTENT_CHARS, trim_whitespace=False)
    id = StrictCharField(
        max_length=64,
        required=False,
        allow_null=True,
        default=None,
        help_text="The message's id, for provenance.",
    )


class ExtractInputSerializer(StrictSerializer):
    messages = serializers.ListField(
        child=ExtractMessageSerializer(),
        min_length=1,
        max_length=MAX_MESSAGES,
        required=False,
        allow_null=True,
        default=None,
        help_text="At most 50. Left out with a conversationId: the stored messages are read.",
    )
    agentId = StrictCharField(
        max_length=64, required=False, allow_null=True, default=None, help_text="Admin keys: the agent."
    )
    visibility = serializers.ChoiceField(
        choices=Visibility.choices,
        required=False,
        allow_null=True,
        default=None,
        help_text="New facts' visibility; default: the agent's extractionConfig.visibility, bounded by the "
        "conversation.",
    )
    groupIds = serializers.ListField(
        child=StrictCharField(max_length=64), required=False, allow_null=True, default=None, max_length=50
    )
    category = StrictCharField(
        max_length=64,
        required=False,
        allow_null=True,
        default=None,
        help_text="Every fact's category; default: the model's choice among allowedCategories.",
    )
    conversationId = StrictCharField(
        max_length=255,
        required=False,
        allow_null=True,
        default=None,
        help_text="The stored conversation the messages are of. Without messages: its stored messages are "
        "read (those the agent may read, past what it extracted, at most 50, the memory channel alone).",
    )
    afterMessageId = StrictCharField(
        max_length=64,
        required=False,
        allow_null=True,
        default=None,
        help_text="With conversationId and no messages: read the stored messages after this one.",
    )
    messageIds = serializers.ListField(
        child=StrictCharField(max_length=64),
        min_length=1,
        max_length=MAX_MESSAGES,
        required=False,
        allow_null=True,
        default=None,
        help_text="With conversationId and no messages: read these stored messages (those this agent "
        "extracted before are left out, and listed in alreadyExtracted).",
    )
    dryRun = StrictBooleanField(required=False, default=False)
    turnId = StrictCharField(max_length=128, required=False, allow_null=True, default=None)
    keyPrefix = StrictCharField(
        max_length=MAX_KEY_CHARS - 1,
        required=False,
        allow_null=True,
        default=None,
        trim_whitespace=False,
        help_text="The facts' place, a key's start ending with '/' (a LangGraph namespace's, say): each "
        "fact's key goes under it, and the facts are compared only with the entries under it in the scope "
        "new facts go to.",
    )

    def given_messages(self) -> list[GivenMessage] | None:
        messages = self.validated_data["messages"]
        if messages is None:
            return None
        return [GivenMessage(m["role"], m["content"], m["id"]) for m in messages]


class ExtractOperationSerializer(serializers.Serializer):
    op = serializers.ChoiceField(choices=[(o, o) for o in ("ADD", "UPDATE", "NOOP", "REJECTED", "SKIPPED")])
    key = serializers.CharField()
    value = serializers.CharField()
    category = serializers.CharField()
    confidence = serializers.FloatField()
    sources = serializers.ListField(
        child=serializers.JSONField(), help_text="The messages it came from: their ids, else their indexes."
    )
    entryId = serializers.CharField(allow_null=True, help_text="The entry written (ADD, UPDATE) or matched.")
    matchedBy = serializers.CharField(required=False, help_text="key, or meaning (the embedder).")
    previousValue = serializers.JSONField(required=False, help_text="UPDATE: the value it replaced.")
    visibility = serializers.CharField(required=False)
    groupIds = serializers.ListField(child=serializers.CharField(), required=False)
    reason = serializers.CharField(required=False, help_text="REJECTED and SKIPPED: why.")
    observedAt = serializers.DateTimeField(
        required=False,
        allow_null=True,
        help_text="ADD, UPDATE and SKIPPED: when what the fact says was observed (its newest message's "
        "time).",
    )
    storedObservedAt = serializers.DateTimeField(
        required=False,
        help_text="SKIPPED: when the stored value was observed, after the fact's message: it stays.",
    )


class ExtractOutputSerializer(serializers.Serializer):
    userId = serializers.CharField()
    agentId = serializers.CharField()
    conversationId = serializers.CharField(allow_null=True)
    dryRun = serializers.BooleanField()
    model = serializers.CharField()
    promptVersion = serializers.CharField()
    cost = serializers.FloatField(help_text="Dollars, from the provider's usage.")
    added = serializers.IntegerField()
    updated = serializers.IntegerField()
    unchanged = serializers.IntegerField()
    rejected = serializers.IntegerField()
    skipped = serializers.IntegerField(help_text="Facts older than the stored value (time order).")
    messages = serializers.IntegerField(help_text="Messages sent to the model.")
    alreadyExtracted = serializers.ListField(
        child=serializers.CharField(),
        help_text="The messages named (by id) that this agent extracted before: left out.",
    )
    operations = ExtractOperationSerializer(many=True)
