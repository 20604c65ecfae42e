"""memory-service's field names (camelCase) in and out. Input serializers check types only; services hold
the rules (attribution, epochs, batch size, gating)."""

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from conversations.models import Channel, Checkpoint, Conversation, Message, MessageRole
from conversations.selectors import DEFAULT_PAGE, MAX_EPOCH, MAX_PAGE, MAX_SEARCH, VIEW_AGENT, ScoredMessage
from conversations.services import MAX_BLOCKS, MessageWrite, SyncMessage
from conversations.store import AnyMessage
from memoryplatform.api.pagination import MAX_OFFSET
from memoryplatform.api.serializers import (
    AsciiIntegerField,
    StrictCharField,
    StrictInput,
    iso_utc,
    validator,
)
from memoryplatform.text import MAX_QUERY_CHARS
from usermemory.api.serializers import (
    ConfidenceField,
    MemoryEntryOutputSerializer,
    RankedFiltersSerializer,
    RecallQuerySerializer,
    ScoredMemoryEntryOutputSerializer,
)
from usermemory.ranking import SEARCH_MODES


def _min_score(what: str) -> ConfidenceField:
    return ConfidenceField(
        required=False,
        help_text=f"Only {what} at least this relevant: the score is the probability of relevance (0 to 1), "
        "the same from one query to the next.",
    )


# --- Conversations ---------------------------------------------------------------------------------------


class ConversationOutputSerializer(serializers.ModelSerializer):
    id = serializers.CharField(read_only=True)
    userId = serializers.CharField(source="user_id")
    groupId = serializers.CharField(source="group_id", allow_null=True)
    createdAt = serializers.DateTimeField(source="created_at")

    class Meta:
        model = Conversation
        fields = ["id", "userId", "groupId", "title", "createdAt"]

    def to_representation(self, instance: Conversation) -> dict[str, Any]:
        """The declared fields above, built directly (a test holds the two to the same output)."""
        return {
            "id": str(instance.id),
            "userId": instance.user_id,
            "groupId": instance.group_id,
            "title": instance.title,
            "createdAt": iso_utc(instance.created_at),
        }


class ConversationCreateInputSerializer(StrictInput):
    returned_by = ConversationOutputSerializer

    userId = StrictCharField(max_length=255)
    title = StrictCharField(max_length=200, required=False, allow_blank=True, default="")
    groupId = StrictCharField(max_length=64, required=False, allow_null=True, default=None)


class ConversationListQuerySerializer(serializers.Serializer):
    userId = StrictCharField(max_length=255, required=False, help_text="Only this user's conversations.")
    after = serializers.CharField(required=False, max_length=64, help_text="A conversation id (cursor).")
    limit = AsciiIntegerField(required=False, min_value=1, max_value=MAX_PAGE, default=DEFAULT_PAGE)


class ConversationPageSerializer(serializers.Serializer):
    data = ConversationOutputSerializer(many=True)  # type: ignore[assignment]  # a declared field: DRF takes it off the class
    nextCursor = serializers.CharField(
        allow_null=True,
        help_text="The id to pass as `after` for the next page; null when nothing more follows.",
    )


# --- Messages --------------------------------------------------------------------------------------------


@extend_schema_field(
    {
        "type": "object",
        "properties": {"type": {"type": "string", "minLength": 1}},
        "required": ["type"],
        "additionalProperties": True,
    }
)
class ContentBlockField(serializers.DictField):
    """One content block, such as ``{"type": "text", "text": "..."}``."""


class MessageOutputSerializer(serializers.ModelSerializer):
    id = serializers.CharField(read_only=True)
    conversationId = serializers.CharField(source="conversation_id")
    agentId = serializers.CharField(source="agent_id", allow_null=True)
    memoryEpoch = serializers.IntegerField(source="memory_epoch", allow_null=True)
    content = serializers.ListField(child=ContentBlockField())
    sessionId = serializers.CharField(source="session_id", allow_null=True)
    createdAt = serializers.DateTimeField(source="created_at")

    class Meta:
        model = Message
        fields = [
            "id",
            "conversationId",
            "seq",
            "channel",
            "role",
            "agentId",
            "memoryEpoch",
            "content",
            "sessionId",
            "createdAt",
        ]

    def to_representation(self, instance: AnyMessage) -> dict[str, Any]:
        """The declared fields above, built directly, as an entry's are: the context and the lists render up
        to hundreds of messages a request. A test holds the two to the same output. ``instance`` is a
        :class:`Message` or a :class:`conversations.store.MessageRow`, whose fields have the same names."""
        return {
            "id": str(instance.id),
            "conversationId": str(instance.conversation_id),
            "seq": instance.seq,
            "channel": instance.channel,
            "role": instance.role,
            "agentId": instance.agent_id,
            "memoryEpoch": instance.memory_epoch,
            "content": [dict(block) for block in instance.content],
            "sessionId": instance.session_id,
            "createdAt": iso_utc(instance.created_at),
        }


class MessageInputSerializer(StrictInput):
    """One message: a channel, a role, content blocks and its session; the agent is always the key's."""

    returned_by = MessageOutputSerializer

    channel = serializers.ChoiceField(choices=Channel.choices, required=False, default=Channel.HISTORY)
    role = serializers.ChoiceField(choices=MessageRole.choices)
    content = serializers.ListField(
        child=ContentBlockField(), allow_empty=False, min_length=1, max_length=MAX_BLOCKS
    )
    sessionId = StrictCharField(max_length=128, required=False, allow_null=True, default=None)
    memoryEpoch = AsciiIntegerField(
        min_value=1, max_value=MAX_EPOCH, required=False, allow_null=True, default=None
    )

    def to_write(self) -> MessageWrite:
        return self.write_of(self.validated_data)

    @staticmethod
    def write_of(data: Any) -> MessageWrite:
        """The write of a validated message (:data:`validate_message`'s, or ``validated_data``)."""
        return MessageWrite(
            channel=data["channel"],
            role=data["role"],
            content=data["content"],
            session_id=data["sessionId"],
            memory_epoch=data["memoryEpoch"],
        )


# A message's validation, on the hot path of every append (memoryplatform.api.serializers.Validator).
validate_message = validator(MessageInputSerializer)


class MessageBatchInputSerializer(StrictInput):
    """A batch of 1 to 20 messages, all or nothing. A top-level ``sessionId`` applies to every message that
    does not name its own."""

    messages = MessageInputSerializer(many=True)
    sessionId = StrictCharField(max_length=128, required=False, allow_null=True)


class MessageBatchOutputSerializer(serializers.Serializer):
    data = MessageOutputSerializer(many=True)  # type: ignore[assignment]  # a declared field: DRF takes it off the class


class MessagePageSerializer(serializers.Serializer):
    data = MessageOutputSerializer(many=True)  # type: ignore[assignment]  # a declared field: DRF takes it off the class
    nextCursor = serializers.CharField(
        allow_null=True,
        help_text="The id to pass as `after` for the next page; null when nothing more follows.",
    )


class MessageListQuerySerializer(serializers.Serializer):
    channel = serializers.ChoiceField(choices=Channel.choices, required=False, default=Channel.HISTORY)
    after = serializers.CharField(required=False, max_length=64, help_text="A message id (cursor).")
    limit = AsciiIntegerField(required=False, min_value=1, max_value=MAX_PAGE, default=DEFAULT_PAGE)
    epoch = serializers.CharField(
        required=False, max_length=20, help_text="Memory channel: `latest` (default), `all` or a number."
    )
    view = serializers.ChoiceField(
        choices=[VIEW_AGENT], required=False, help_text="History channel: `agent` for the isolated view."
    )
    agentId = serializers.CharField(
        required=False,
        max_length=64,
        help_text="Viewer and admin keys: the agent whose stream or view to read.",
    )


# --- Memory sync -----------------------------------------------------------------------------------------


class SyncMessageInputSerializer(StrictInput):
    """A message of the caller's memory channel. ``channel``, if sent, is ``memory``."""

    returned_by = MessageOutputSerializer

    channel = serializers.ChoiceField(
        choices=[Channel.MEMORY], required=False, help_text="Only memory: a sync writes the memory channel."
    )
    role = serializers.ChoiceField(choices=MessageRole.choices)
    content = serializers.ListField(
        child=ContentBlockField(), allow_empty=False, min_length=1, max_length=MAX_BLOCKS
    )


class SyncInputSerializer(StrictInput):
    messages = SyncMessageInputSerializer(many=True, allow_empty=False)
    sessionId = StrictCharField(max_length=128, required=False, allow_null=True, default=None)

    def to_messages(self) -> list[SyncMessage]:
        return [SyncMessage(role=m["role"], content=m["content"]) for m in self.validated_data["messages"]]


class SyncOutputSerializer(serializers.Serializer):
    memoryEpoch = serializers.IntegerField(source="memory_epoch", allow_null=True)
    noOp = serializers.BooleanField(source="no_op")
    epochIncremented = serializers.BooleanField(source="epoch_incremented")
    messages = MessageOutputSerializer(many=True, help_text="The messages appended by this sync.")


# --- Checkpoints ------------------------------------------------------------------------------------------


class CheckpointOutputSerializer(serializers.Serializer):
    conversationId = serializers.CharField()
    agentId = serializers.CharField()
    lastEntryId = serializers.CharField(allow_null=True)
    updatedAt = serializers.DateTimeField(allow_null=True)

    @staticmethod
    def shape(*, conversation_id: Any, agent_id: str, checkpoint: Checkpoint | None) -> dict[str, Any]:
        return {
            "conversationId": str(conversation_id),
            "agentId": agent_id,
            "lastEntryId": str(checkpoint.last_message_id) if checkpoint else None,
            "updatedAt": checkpoint.updated_at if checkpoint else None,
        }


class CheckpointInputSerializer(StrictInput):
    returned_by = CheckpointOutputSerializer

    lastEntryId = StrictCharField(max_length=64)


# --- Search across conversations ---------------------------------------------------------------------------


class MessageSearchQuerySerializer(serializers.Serializer):
    q = StrictCharField(
        max_length=MAX_QUERY_CHARS, help_text="Words and phrases, as a web search writes them."
    )
    userId = StrictCharField(max_length=255, required=False, help_text="Only this user's conversations.")
    agentId = StrictCharField(max_length=64, required=False, help_text="Only this agent's messages.")
    channel = serializers.ChoiceField(choices=Channel.choices, required=False)
    limit = AsciiIntegerField(required=False, min_value=1, max_value=MAX_SEARCH, default=DEFAULT_PAGE)
    offset = AsciiIntegerField(required=False, min_value=0, max_value=MAX_OFFSET, default=0)
    mode = serializers.ChoiceField(
        choices=SEARCH_MODES,
        required=False,
        default="keyword",
        help_text="keyword (the default, as before: the words and phrases of a web search, ranked by "
        "full-text rank), semantic (by meaning) or hybrid (meaning and words).",
    )
    minScore = _min_score("messages")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs.get("mode") == "keyword" and "minScore" in attrs:
            raise serializers.ValidationError({"minScore": "keyword search does not score: use mode hybrid."})
        return attrs


class MessageSearchResultSerializer(MessageOutputSerializer):
    """A message found, rendered from a :class:`conversations.selectors.ScoredMessage`."""

    userId = serializers.CharField(source="conversation.user_id")
    score = serializers.FloatField(
        help_text="semantic and hybrid: the probability that the message is relevant (0 to 1), comparable "
        "across queries; keyword: the full-text rank, higher is better."
    )

    class Meta(MessageOutputSerializer.Meta):
        fields = [*MessageOutputSerializer.Meta.fields, "userId", "score"]

    def to_representation(self, instance: ScoredMessage) -> dict[str, Any]:  # type: ignore[override]  # a scored message
        message = instance.message
        return {
            **super().to_representation(message),
            "userId": message.conversation.user_id,
            "score": instance.score,
        }


class MessageSearchPageSerializer(serializers.Serializer):
    data = MessageSearchResultSerializer(many=True)  # type: ignore[assignment]  # a declared field: DRF takes it off the class


# --- Context ----------------------------------------------------------------------------------------------


class ContextMemorySerializer(serializers.Serializer):
    memoryEpoch = serializers.IntegerField(source="memory_epoch", allow_null=True)
    messages = MessageOutputSerializer(many=True, source="memory")


class ContextCaseLogSerializer(serializers.Serializer):
    checkpoint = serializers.CharField(allow_null=True, help_text="The last entry id read, null for none.")
    data = MessageOutputSerializer(many=True)  # type: ignore[assignment]  # a declared field: DRF takes it off the class
    nextCursor = serializers.CharField(allow_null=True)


class ContextOutputSerializer(serializers.Serializer):
    conversation = ConversationOutputSerializer()
    agentId = serializers.CharField(source="agent_id")
    memory = ContextMemorySerializer(source="*")
    caseLog = serializers.SerializerMethodField()
    history = MessageOutputSerializer(many=True)
    userMemories = serializers.SerializerMethodField()
    relevantMessages = serializers.SerializerMethodField()

    def to_representation(self, instance: Any) -> dict[str, Any]:
        """The declared fields above, built directly from an :class:`conversations.services.AgentContext`:
        a context holds up to 1,250 messages, and DRF's nested path costs more than the messages. A test
        holds the two to the same output."""
        message = MessageOutputSerializer().to_representation
        return {
            "conversation": ConversationOutputSerializer().to_representation(instance.conversation),
            "agentId": instance.agent_id,
            "memory": {
                "memoryEpoch": instance.memory_epoch,
                "messages": [message(m) for m in instance.memory],
            },
            "caseLog": self.get_caseLog(instance),
            "history": [message(m) for m in instance.history],
            "userMemories": self.get_userMemories(instance),
            "relevantMessages": self.get_relevantMessages(instance),
        }

    @extend_schema_field(ContextCaseLogSerializer)
    def get_caseLog(self, context: Any) -> dict[str, Any]:  # noqa: N802 (camelCase output)
        message = MessageOutputSerializer().to_representation
        return {
            "checkpoint": str(context.checkpoint.last_message_id) if context.checkpoint else None,
            "data": [message(m) for m in context.case_log.items],
            "nextCursor": context.case_log.next_cursor,
        }

    @extend_schema_field(ScoredMemoryEntryOutputSerializer(many=True))
    def get_userMemories(self, context: Any) -> list[dict[str, Any]]:  # noqa: N802 (camelCase output)
        """The recalled user memories; with ``q``, best first, each with its score."""
        if context.ranked_memories is not None:
            return list(ScoredMemoryEntryOutputSerializer(context.ranked_memories.entries, many=True).data)
        return list(MemoryEntryOutputSerializer(context.user_memories, many=True).data)

    @extend_schema_field(MessageSearchResultSerializer(many=True))
    def get_relevantMessages(self, context: Any) -> list[dict[str, Any]]:  # noqa: N802 (camelCase output)
        """With ``q``: the conversation's messages most relevant to it that the context does not hold, best
        first, each with its score; without: none."""
        if context.relevant_messages is None:
            return []
        return list(MessageSearchResultSerializer(context.relevant_messages.messages, many=True).data)


class ContextQuerySerializer(RecallQuerySerializer, RankedFiltersSerializer):
    """``q``: the user memories recalled by relevance to it (hybrid), narrowed by the filters of every ranked
    read, and the conversation's most relevant messages not in the context already; ``minScore`` (no cut
    when absent): the threshold of both."""

    minScore = _min_score("memories and messages")
