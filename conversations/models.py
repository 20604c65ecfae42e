"""Multi-agent conversation memory (seeds 000, 003 and 004).

A :class:`Conversation` belongs to one end user and, optionally, to one agent group that gates who takes part.
Its :class:`Message` rows live on three channels:

- ``history``: what the user saw. With ``view=agent`` an agent sees every user message and only its own
  replies (seed 004).
- ``memory``: each agent's private ChatMemory stream, in epochs (seed 000).
- ``summary``: the shared, append-only case log (seed 003), read from a per-agent :class:`Checkpoint`.

History and case-log messages get a vector each (:class:`MessageEmbedding`), for search by meaning.

Every message has two numbers, both given while the conversation row is locked, so both follow commit order
and a reader that checkpoints at N never misses a later commit with a smaller number:

- ``seq``, what callers see: its number within its *scope*, the messages that the same callers see. The
  history is one scope, the case log another, and each agent's memory stream one of its own. So an agent
  reading the shared channels sees consecutive numbers whatever other agents keep in their private memory
  streams (issue 44, finding 12), and a cursor (``after``, a checkpoint) is a number of its own scope.
- ``position``, never shown: its place among all the conversation's messages, the order of the background
  extraction's watermark (which reads every channel an agent may read) and of the GDPR export.
"""

import uuid

from django.db import models
from django.db.models import Q
from django.utils import timezone

from apikeys.models import Agent, AgentGroup
from memoryplatform.models import QueuedForVector, StoredEmbedding


class Channel(models.TextChoices):
    HISTORY = "history", "history"
    MEMORY = "memory", "memory"
    SUMMARY = "summary", "summary"


class MessageRole(models.TextChoices):
    USER = "user", "user"
    ASSISTANT = "assistant", "assistant"
    SYSTEM = "system", "system"
    TOOL = "tool", "tool"


class Conversation(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    user_id = models.CharField(max_length=255)
    group = models.ForeignKey(
        AgentGroup,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="conversations",
        help_text="When set, only members of this group may take part.",
    )
    title = models.CharField(max_length=200, blank=True)
    next_position = models.PositiveBigIntegerField(
        default=1, editable=False, help_text="The position the next message gets (across channels; internal)."
    )
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        indexes = [models.Index(fields=["user_id", "created_at"], name="conv_user_created_idx")]

    def __str__(self) -> str:
        return f"{self.title or self.id} ({self.user_id})"


class Message(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="messages")
    seq = models.PositiveBigIntegerField(
        help_text="Its number within its scope (the history, the case log, or its agent's memory stream), "
        "in commit order: what callers see."
    )
    position = models.PositiveBigIntegerField(
        help_text="Its place among all the conversation's messages, in commit order (internal, never shown)."
    )
    channel = models.CharField(max_length=8, choices=Channel.choices)
    role = models.CharField(max_length=10, choices=MessageRole.choices)
    agent = models.ForeignKey(
        Agent,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="conversation_messages",
        help_text="Set from the API key: an agent key's messages always carry its agent (user-role ones "
        "too); only admin keys and staff write messages without one.",
    )
    memory_epoch = models.PositiveIntegerField(null=True, blank=True, help_text="Memory channel only.")
    content = models.JSONField(help_text="A list of content blocks.")
    # NULL, not "": ADR 0023 (seed 003) makes session_id nullable, and a write that names none has none.
    session_id = models.CharField(  # noqa: DJ001
        max_length=128, null=True, blank=True, help_text="The client's session, when the write names one."
    )
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["conversation", "position"], name="conv_message_position_uniq"),
            # One number per scope: a shared channel's, and each agent's memory stream's. The append reads
            # each scope's last number through these.
            models.UniqueConstraint(
                fields=["conversation", "channel", "seq"],
                condition=~Q(channel="memory"),
                name="conv_message_shared_seq_uniq",
            ),
            models.UniqueConstraint(
                fields=["conversation", "agent", "seq"],
                condition=Q(channel="memory"),
                name="conv_message_memory_seq_uniq",
            ),
        ]
        indexes = [
            models.Index(fields=["conversation", "channel", "seq"], name="conv_msg_channel_seq_idx"),
            models.Index(
                fields=["conversation", "channel", "agent", "memory_epoch", "seq"],
                name="conv_msg_memory_idx",
            ),
            models.Index(fields=["created_at"], name="conv_msg_created_idx"),
        ]

    def __str__(self) -> str:
        return f"#{self.seq} {self.channel}/{self.role}"


class Checkpoint(models.Model):
    """The last case-log (``summary``) entry an agent has read in a conversation.

    The message is kept by id and sequence number, not by foreign key, so the case log can be deleted in one
    statement by GDPR erasure.
    """

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="checkpoints")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="conversation_checkpoints")
    last_message_id = models.UUIDField()
    last_seq = models.PositiveBigIntegerField()
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["conversation", "agent"], name="conv_checkpoint_agent_uniq"),
        ]

    def __str__(self) -> str:
        return f"{self.agent_id} @ #{self.last_seq}"


class MessageEmbedding(StoredEmbedding):
    """The vector of a history or case-log message with the turn before it as context
    (:mod:`conversations.embedding`), shaped as a memory entry's.

    The foreign key is the database's, ON DELETE CASCADE (migration 0004): every delete of a message (GDPR
    erasure, a conversation deleted in the admin) removes its vector in the same statement. Django's side
    does nothing (``DO_NOTHING``), so deleting a user's messages stays one statement that loads no rows."""

    message = models.OneToOneField(
        Message, primary_key=True, on_delete=models.DO_NOTHING, related_name="embedding", db_constraint=False
    )

    def __str__(self) -> str:
        return f"{self.message_id} [{self.model}]"


class PendingMessageVector(QueuedForVector):
    """A history or case-log message whose vector is pending (usermemory.models.QueuedForVector): queued by a
    trigger as the message is written, with the database's ON DELETE CASCADE (migration 0005)."""

    message = models.OneToOneField(
        Message,
        primary_key=True,
        on_delete=models.DO_NOTHING,
        related_name="pending_vector",
        db_constraint=False,
    )

    class Meta:
        indexes = [
            models.Index(fields=["queued_at"], name="conv_pending_vector_queued"),
            models.Index(
                fields=["queued_at"],
                name="conv_pending_vector_suspect",
                condition=models.Q(attempts__gt=0, parked_at__isnull=True),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.message_id} queued {self.queued_at}"
