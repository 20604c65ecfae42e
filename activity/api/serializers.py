from typing import Any

from rest_framework import serializers

from activity.models import Task, ToolCall
from activity.services import MAX_BATCH, ToolCallWrite
from memoryplatform import publicids
from memoryplatform.api.serializers import AsciiIntegerField, PublicIdField, StrictCharField, StrictInput
from usermemory.models import Visibility

MAX_DURATION_MS = 2**31 - 1


def _text(max_length: int, **options: Any) -> StrictCharField:
    return StrictCharField(
        max_length=max_length, required=False, allow_blank=True, allow_null=True, default="", **options
    )


class BlankAsNullField(serializers.CharField):
    """A text the model stores blank when absent (a task id, a user id): null in the output."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(read_only=True, allow_null=True, **kwargs)

    def get_attribute(self, instance: Any) -> Any:
        return super().get_attribute(instance) or None  # None: the serializer writes null


class ToolCallOutputSerializer(serializers.ModelSerializer):
    id = PublicIdField(publicids.TOOL_CALL)
    agentId = serializers.CharField(source="agent_id")
    args = serializers.JSONField()
    result = serializers.JSONField()
    durationMs = serializers.IntegerField(source="duration_ms", allow_null=True)
    taskId = BlankAsNullField(source="task_id")
    conversationId = BlankAsNullField(source="conversation_id")
    sessionId = BlankAsNullField(source="session_id")
    createdAt = serializers.DateTimeField(source="created_at")

    class Meta:
        model = ToolCall
        fields = [
            "id",
            "agentId",
            "tool",
            "args",
            "result",
            "success",
            "durationMs",
            "error",
            "taskId",
            "conversationId",
            "sessionId",
            "via",
            "createdAt",
        ]


class ToolCallInputSerializer(StrictInput):
    """One call as the agent reports it. ``result`` is any JSON, a text included. The agent is the key's."""

    returned_by = ToolCallOutputSerializer

    tool = StrictCharField(max_length=128)
    args = serializers.JSONField(required=False, default=None, help_text="The call's arguments (JSON).")
    result = serializers.JSONField(required=False, default=None, help_text="JSON or text, size-limited.")
    success = serializers.BooleanField(required=False, default=True)
    durationMs = AsciiIntegerField(
        required=False, allow_null=True, default=None, min_value=0, max_value=MAX_DURATION_MS
    )
    error = _text(10_000, trim_whitespace=False)
    taskId = _text(64)
    conversationId = _text(255)
    sessionId = _text(255)
    createdAt = serializers.DateTimeField(
        required=False, allow_null=True, default=None, help_text="When the call was made; default: now."
    )

    def to_write(self, data: dict[str, Any]) -> ToolCallWrite:
        return ToolCallWrite(
            tool=data["tool"],
            args=data["args"],
            result=data["result"],
            success=data["success"],
            duration_ms=data["durationMs"],
            error=data["error"] or "",
            task_id=data["taskId"] or "",
            conversation_id=data["conversationId"] or "",
            session_id=data["sessionId"] or "",
            created_at=data["createdAt"],
        )


class ToolCallBatchInputSerializer(StrictInput):
    calls = serializers.ListField(child=ToolCallInputSerializer(), min_length=1, max_length=MAX_BATCH)

    def to_writes(self) -> list[ToolCallWrite]:
        child = ToolCallInputSerializer()
        return [child.to_write(call) for call in self.validated_data["calls"]]


class ToolCallPageOutputSerializer(serializers.Serializer):
    results = ToolCallOutputSerializer(many=True)
    next = serializers.CharField(
        allow_null=True, help_text="Pass as `after` for the next page; null at the end."
    )


class ToolCallBatchOutputSerializer(serializers.Serializer):
    calls = ToolCallOutputSerializer(many=True)


class ToolCallQuerySerializer(serializers.Serializer):
    agentId = StrictCharField(max_length=64, required=False, help_text="An agent key: only its own.")
    tool = StrictCharField(max_length=128, required=False)
    taskId = StrictCharField(max_length=64, required=False)
    success = serializers.BooleanField(required=False, allow_null=True, default=None)
    since = serializers.DateTimeField(required=False, help_text="Calls made at or after this time.")
    after = StrictCharField(
        max_length=200, required=False, help_text="The `next` cursor of the previous page."
    )
    limit = AsciiIntegerField(required=False, min_value=1, max_value=500, default=50)


class TaskOutputSerializer(serializers.ModelSerializer):
    id = PublicIdField(publicids.TASK)
    creatorId = serializers.CharField(source="creator_id")
    assigneeId = serializers.CharField(source="assignee_id")
    userId = BlankAsNullField(source="user_id")
    context = serializers.JSONField()  # type: ignore[assignment]  # a declared field: DRF takes it off the class
    result = serializers.JSONField()
    groupIds = serializers.ListField(source="group_ids", child=serializers.CharField())
    memoryEntryId = PublicIdField(
        publicids.ENTRY,
        source="memory_entry_id",
        allow_null=True,
        help_text="The memory the result was stored as.",
    )
    createdAt = serializers.DateTimeField(source="created_at")
    updatedAt = serializers.DateTimeField(source="updated_at")
    finishedAt = serializers.DateTimeField(source="finished_at", allow_null=True)

    class Meta:
        model = Task
        fields = [
            "id",
            "title",
            "creatorId",
            "assigneeId",
            "userId",
            "context",
            "status",
            "result",
            "visibility",
            "groupIds",
            "memoryEntryId",
            "createdAt",
            "updatedAt",
            "finishedAt",
        ]


class TaskCreateInputSerializer(StrictInput):
    returned_by = TaskOutputSerializer

    title = StrictCharField(max_length=500)
    assigneeId = StrictCharField(max_length=64, required=False, allow_null=True, default=None)
    userId = StrictCharField(max_length=255, required=False, allow_null=True, default=None)
    context = serializers.JSONField(  # type: ignore[assignment]  # a declared field: DRF takes it off the class
        required=False,
        default=None,
        help_text="Any JSON the assignee needs: at most ACTIVITY_MAX_CHARS (default 16,384) characters as "
        "compact JSON, else a 400.",
    )
    visibility = serializers.ChoiceField(
        choices=Visibility.choices,
        required=False,
        default=Visibility.SELF,
        help_text="Of the result's memory when the task is done with a user.",
    )
    groupIds = serializers.ListField(
        child=StrictCharField(max_length=64),
        required=False,
        allow_null=True,
        default=None,
        max_length=50,
        help_text="Groups of the result's memory: the creating agent must be in each (else a 403).",
    )


class TaskUpdateInputSerializer(StrictInput):
    returned_by = TaskOutputSerializer

    status = serializers.ChoiceField(choices=Task.Status.choices, required=False)
    result = serializers.JSONField(
        required=False,
        help_text="Any JSON; sent, it replaces the result. At most ACTIVITY_MAX_CHARS (default 16,384) "
        "characters as compact JSON, else a 400.",
    )


class TaskQuerySerializer(serializers.Serializer):
    assigneeId = StrictCharField(max_length=64, required=False)
    creatorId = StrictCharField(max_length=64, required=False)
    status = serializers.ChoiceField(choices=Task.Status.choices, required=False)
