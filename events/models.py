"""The outbox of memory events (:class:`Event`), the webhook subscriptions that receive them
(:class:`WebhookSubscription`) and every delivery attempt (:class:`DeliveryAttempt`).

An event row is written in the transaction of the change it reports: history's insert into usermemory's
event log fires a trigger (migration 0002) that writes the matching rows here, and extraction and Dream call
:func:`events.services.event_record`. ``txid`` is the writing transaction's id: the change feed and the
deliveries read in ``(txid, id)`` order, below the oldest transaction still running (:mod:`events.store`).
"""

import uuid

from django.db import models
from django.db.models.expressions import RawSQL

from apikeys.models import Agent
from usermemory.models import MAX_KEY_CHARS, Visibility


class EventType(models.TextChoices):
    MEMORY_CREATED = "memory.created", "memory.created"
    MEMORY_UPDATED = "memory.updated", "memory.updated"
    MEMORY_SUPERSEDED = "memory.superseded", "memory.superseded"
    MEMORY_EXPIRED = "memory.expired", "memory.expired"
    MEMORY_DELETED = "memory.deleted", "memory.deleted"
    CONFLICT_FLAGGED = "conflict.flagged", "conflict.flagged"
    CONFLICT_SETTLED = "conflict.settled", "conflict.settled"
    EXTRACTION_WROTE = "extraction.wrote", "extraction.wrote"
    DREAM_RUN_ENDED = "dream.run_ended", "dream.run_ended"
    USER_ERASED = "user.erased", "user.erased"


class Event(models.Model):
    """One memory event, as the feed and every subscription read it. Its scope (owner, visibility and
    groups before and after the change) is the history event's, and an agent sees it by the same rule as
    history (:func:`usermemory.sql.history.seen_by_agent`)."""

    txid = models.BigIntegerField(
        db_default=RawSQL("pg_current_xact_id()::text::bigint", ()),
        help_text="the writing transaction's id: the feed's order is (txid, id)",
    )
    type = models.CharField(max_length=32, choices=EventType.choices)
    occurred_at = models.DateTimeField()
    user_id = models.CharField(max_length=255, blank=True)
    key = models.CharField(max_length=MAX_KEY_CHARS, blank=True)
    entry_id = models.BigIntegerField(null=True, blank=True)
    history_event_id = models.BigIntegerField(null=True, blank=True)
    owner = models.CharField(max_length=64, blank=True, help_text="the entry's source agent")
    visibility = models.CharField(max_length=6, choices=Visibility.choices, default=Visibility.SELF)
    group_ids = models.JSONField(default=list, blank=True)
    old_visibility = models.CharField(max_length=6, choices=Visibility.choices, default=Visibility.SELF)
    old_group_ids = models.JSONField(default=list, blank=True)
    value = models.JSONField(null=True, blank=True)
    old_value = models.JSONField(null=True, blank=True)
    data = models.JSONField(null=True, blank=True, help_text="what an extraction or a Dream run reports")

    class Meta:
        indexes = [
            models.Index(fields=["txid", "id"], name="events_event_feed_idx"),
            models.Index(fields=["user_id"], name="events_event_user_idx"),
            models.Index(fields=["occurred_at"], name="events_event_occurred_idx"),  # the retention's
        ]

    def __str__(self) -> str:
        return f"{self.type} {self.user_id}:{self.key}"


class PruneMark(models.Model):
    """How far the events' retention (:func:`events.services.event_prune`) has deleted, in the feed's order:
    the position ``(txid, event_id)`` of the last event it deleted, raised in each batch's transaction before
    its delete, never lowered. One row (id 1), none until a prune first deletes. A feed cursor before it may
    have missed events that were deleted: the feed says so (410 ``cursor_expired``) instead of going on
    without them."""

    id = models.PositiveSmallIntegerField(primary_key=True)
    txid = models.BigIntegerField()
    event_id = models.BigIntegerField()
    raised_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"pruned to ({self.txid}, {self.event_id})"


class WebhookSubscription(models.Model):
    """A URL that receives the events of ``event_types`` (none: all) that ``agent`` may read, in order, one
    at a time, from ``(cursor_txid, cursor_id)`` on."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    url = models.URLField(max_length=2000)
    event_types = models.JSONField(default=list, blank=True, help_text="empty: every type")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="webhooks")
    description = models.CharField(max_length=200, blank=True)
    secret = models.CharField(max_length=100, editable=False)
    previous_secret = models.CharField(
        max_length=100, blank=True, editable=False, help_text="the secret before a rotation, still signing"
    )
    previous_secret_until = models.DateTimeField(
        null=True, blank=True, editable=False, help_text="when the previous secret stops signing"
    )
    enabled = models.BooleanField(default=True)
    disabled_reason = models.CharField(max_length=200, blank=True)
    cursor_txid = models.BigIntegerField(default=0)
    cursor_id = models.BigIntegerField(default=0)
    failures = models.PositiveIntegerField(default=0, help_text="failed tries of the next event")
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    last_status = models.PositiveIntegerField(null=True, blank=True)
    last_answer = models.CharField(max_length=500, blank=True)
    delivered = models.PositiveBigIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at"]

    def __str__(self) -> str:
        return f"{self.url} ({self.agent_id})"


class DeliveryAttempt(models.Model):
    """One POST of an event to a subscription: its answer's status and first bytes, or the error."""

    subscription = models.ForeignKey(WebhookSubscription, on_delete=models.CASCADE, related_name="attempts")
    event = models.ForeignKey(Event, on_delete=models.CASCADE, related_name="attempts")
    attempted_at = models.DateTimeField()
    succeeded = models.BooleanField()
    status = models.PositiveIntegerField(null=True, blank=True)
    answer = models.CharField(max_length=500, blank=True)
    error = models.CharField(max_length=200, blank=True)
    duration_ms = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["-attempted_at", "-id"]
        indexes = [models.Index(fields=["subscription", "-attempted_at"], name="events_attempt_sub_idx")]

    def __str__(self) -> str:
        return f"{self.event_id} to {self.subscription_id}: {self.status or self.error}"
