from typing import Any

from rest_framework import serializers

from events.models import EventType, WebhookSubscription
from events.selectors import DEFAULT_FEED_PAGE, MAX_FEED_PAGE
from events.services import MAX_PREVIOUS_SECRET_SECONDS
from memoryplatform.api.serializers import AsciiIntegerField, StrictCharField, StrictInput
from usermemory.models import Visibility


class EventQuerySerializer(serializers.Serializer):
    after = StrictCharField(
        max_length=80,
        required=False,
        help_text="The `next` cursor of the previous page; none: the oldest event.",
    )
    types = StrictCharField(
        max_length=400, required=False, help_text="Comma-separated event types (none: every type)."
    )
    limit = AsciiIntegerField(required=False, min_value=1, max_value=MAX_FEED_PAGE, default=DEFAULT_FEED_PAGE)

    def validate_types(self, value: str) -> list[str]:
        types = [t.strip() for t in value.split(",") if t.strip()]
        unknown = sorted(set(types) - set(EventType.values))
        if unknown:
            raise serializers.ValidationError(f"Unknown event types: {', '.join(unknown)}.")
        return types


class EventOutputSerializer(serializers.Serializer):
    """One event (the same JSON a webhook receives as its body)."""

    id = serializers.CharField(help_text="The event's public id: a receiver drops a duplicate by it.")
    type = serializers.ChoiceField(choices=EventType.choices)
    occurredAt = serializers.DateTimeField()
    userId = serializers.CharField()
    key = serializers.CharField(required=False, allow_null=True)
    entryId = serializers.CharField(required=False, allow_null=True, help_text="The entry's public id.")
    visibility = serializers.ChoiceField(choices=Visibility.choices, required=False)
    groupIds = serializers.ListField(child=serializers.CharField(), required=False)
    sourceAgent = serializers.CharField(required=False, allow_null=True)
    value = serializers.JSONField(
        required=False, allow_null=True, help_text="null when the reader may not see it"
    )
    oldValue = serializers.JSONField(required=False, allow_null=True)
    valueHidden = serializers.BooleanField(required=False)
    # A field named like Serializer.data: DRF's metaclass takes declared fields out of the class, so the
    # property stays; only the stubs see a clash.
    data = serializers.JSONField(  # type: ignore[assignment]
        required=False, allow_null=True, help_text="An extraction's or a Dream run's report."
    )


class EventPageOutputSerializer(serializers.Serializer):
    results = EventOutputSerializer(many=True)
    next = serializers.CharField(
        help_text="The cursor to pass as `after` next time (the same when none came)."
    )


class WebhookOutputSerializer(serializers.ModelSerializer):
    agentId = serializers.CharField(source="agent_id")
    eventTypes = serializers.ListField(source="event_types", child=serializers.CharField())
    disabledReason = serializers.CharField(source="disabled_reason")
    failures = serializers.IntegerField()
    nextAttemptAt = serializers.DateTimeField(source="next_attempt_at", allow_null=True)
    lastAttemptAt = serializers.DateTimeField(source="last_attempt_at", allow_null=True)
    lastStatus = serializers.IntegerField(source="last_status", allow_null=True)
    delivered = serializers.IntegerField()
    createdAt = serializers.DateTimeField(source="created_at")

    class Meta:
        model = WebhookSubscription
        fields = [
            "id",
            "url",
            "agentId",
            "eventTypes",
            "description",
            "enabled",
            "disabledReason",
            "failures",
            "nextAttemptAt",
            "lastAttemptAt",
            "lastStatus",
            "delivered",
            "createdAt",
        ]


class WebhookCreatedOutputSerializer(WebhookOutputSerializer):
    secret = serializers.SerializerMethodField(help_text="The signing secret: shown this once, never again.")

    class Meta(WebhookOutputSerializer.Meta):
        fields = [*WebhookOutputSerializer.Meta.fields, "secret"]

    def get_secret(self, subscription: WebhookSubscription) -> str:
        return str(self.context["secret"])


class WebhookRotatedOutputSerializer(WebhookCreatedOutputSerializer):
    previousSecretExpiresAt = serializers.DateTimeField(
        source="previous_secret_until",
        allow_null=True,
        help_text="Until then every delivery is signed with the previous secret too; null: it stopped "
        "at once.",
    )

    class Meta(WebhookCreatedOutputSerializer.Meta):
        fields = [*WebhookCreatedOutputSerializer.Meta.fields, "previousSecretExpiresAt"]


def _types(**options: Any) -> serializers.ListField:
    return serializers.ListField(
        child=serializers.ChoiceField(choices=EventType.choices), max_length=len(EventType.values), **options
    )


class WebhookCreateInputSerializer(StrictInput):
    returned_by = WebhookCreatedOutputSerializer

    url = serializers.URLField(max_length=2000)
    agentId = StrictCharField(max_length=64, help_text="The agent whose view of the memories it gets.")
    eventTypes = _types(required=False, default=list, help_text="Empty or absent: every type.")
    description = StrictCharField(max_length=200, required=False, allow_blank=True, default="")


class WebhookUpdateInputSerializer(StrictInput):
    returned_by = WebhookOutputSerializer

    url = serializers.URLField(max_length=2000, required=False)
    eventTypes = _types(required=False)
    description = StrictCharField(max_length=200, required=False, allow_blank=True)
    enabled = serializers.BooleanField(required=False, help_text="true again: failures cleared, it resumes.")


class WebhookRotateInputSerializer(StrictInput):
    returned_by = WebhookRotatedOutputSerializer

    previousSecretValidSeconds = AsciiIntegerField(
        required=False,
        min_value=0,
        max_value=MAX_PREVIOUS_SECRET_SECONDS,
        default=24 * 3600,
        help_text="How long the replaced secret goes on signing beside the new one (default a day; 0: "
        "stop at once; at most a week).",
    )
