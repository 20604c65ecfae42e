"""Extraction's records: one :class:`Extraction` per LLM call (its proposals, accepted or rejected, its cost),
one :class:`ExtractionWatermark` per (conversation, agent): the last message the background extraction read
for that agent, and :class:`ExtractedMessage`: the messages past it that the extract door read."""

from django.db import models
from django.db.models import Q

from apikeys.models import Agent
from conversations.models import Conversation
from usermemory.models import Visibility


class ExtractionPolicy(models.Model):
    """An agent's extraction settings (``memoryPolicy.extractionConfig``), one-to-one with the agent; an agent
    without a row has the defaults. Written through :func:`usermemory.governance.policy_update` with the
    agent's other policy parts, in one transaction."""

    agent = models.OneToOneField(
        Agent, primary_key=True, on_delete=models.CASCADE, related_name="extraction_policy"
    )
    extract_from_conversations = models.BooleanField(
        default=False,
        help_text="Facts are extracted in the background from the conversations this agent takes part in",
    )
    max_extraction_cost_per_run = models.DecimalField(
        max_digits=8,
        decimal_places=2,
        default=0.50,
        help_text="Dollars of LLM calls one background extraction run may spend for this agent",
    )
    extraction_visibility = models.CharField(
        max_length=6,
        choices=Visibility.choices,
        default=Visibility.SELF,
        help_text="An extracted fact's visibility when the request names none, and at most for facts from "
        "a conversation without a group",
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "extraction policy"
        verbose_name_plural = "extraction policies"

    def __str__(self) -> str:
        return f"extraction policy of {self.agent_id}"


class Extraction(models.Model):
    """One extraction: one LLM call over up to 50 messages about one user, and what came of each fact; or a
    background batch passed over (``skipped``, ``error`` says why: its prompt alone would cost more than the
    agent's ``maxExtractionCostPerRun``).

    ``proposals``: the facts the model proposed, each with the operation decided in code (``add``,
    ``update``, ``noop``) or ``rejected`` and why, or ``skipped`` (time order: the stored value was observed
    after the fact's message; with both times), and the entry it wrote or matched. They hold the user's
    data: a GDPR erasure deletes the user's extractions (:func:`extraction.services.extraction_erase_user`).
    """

    class Trigger(models.TextChoices):
        API = "api", "api"
        BACKGROUND = "background", "background"

    class Status(models.TextChoices):
        SUCCEEDED = "succeeded", "succeeded"
        FAILED = "failed", "failed"
        SKIPPED = "skipped", "skipped"  # a background batch its prompt's cost alone kept from the model

    trigger = models.CharField(max_length=10, choices=Trigger.choices)
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="+")
    user_id = models.CharField(max_length=255)
    conversation_id = models.CharField(max_length=255, blank=True)
    dry_run = models.BooleanField(default=False)
    status = models.CharField(max_length=9, choices=Status.choices)
    messages = models.PositiveIntegerField(default=0, help_text="Messages sent to the model.")
    facts_added = models.PositiveIntegerField(default=0)
    facts_updated = models.PositiveIntegerField(default=0)
    facts_unchanged = models.PositiveIntegerField(default=0)
    facts_rejected = models.PositiveIntegerField(default=0)
    facts_skipped = models.PositiveIntegerField(
        default=0, help_text="Not written: the stored value was observed after the fact's message."
    )
    cost = models.DecimalField(
        max_digits=12, decimal_places=6, default=0, help_text="Dollars, from the provider's usage."
    )
    model = models.CharField(max_length=200, blank=True)
    prompt_version = models.CharField(max_length=32, blank=True)
    proposals = models.JSONField(default=list, blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=["succeeded", "failed", "skipped"]), name="extraction_status_valid"
            ),
        ]
        indexes = [
            models.Index(fields=["user_id"], name="extraction_user_idx"),
            models.Index(fields=["agent", "-created_at"], name="extraction_agent_idx"),
        ]

    def __str__(self) -> str:
        return f"extraction #{self.pk} for {self.user_id} by {self.agent_id} ({self.status})"


class ExtractionWatermark(models.Model):
    """The last message (by its ``position`` in the conversation, which counts every channel's messages; the
    column kept its name from when ``seq`` did) the background extraction has read for one agent in one
    conversation. Advanced by compare-and-set in the transaction that writes the facts of the
    messages up to it, so a crash before the commit leaves it where it was: the messages are read again,
    never skipped, and never extracted twice. The extract door moves it too, forward over the messages it
    extracted (:mod:`extraction.stored`)."""

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="+")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="+")
    last_seq = models.PositiveBigIntegerField(default=0)
    updated_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["conversation", "agent"], name="extraction_watermark_uniq"),
        ]

    def __str__(self) -> str:
        return f"{self.agent_id} @ #{self.last_seq} of {self.conversation_id}"


class ExtractedMessage(models.Model):
    """A message the extract door extracted for an agent past the agent's watermark (by its ``position``):
    covered, so neither the background nor the door reads it again. The watermark moves over it as soon as
    every message before it is covered too, and the row goes (:func:`extraction.stored.settle`)."""

    # No index of its own: the unique constraint leads with the conversation.
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="+", db_index=False)
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="+")
    position = models.PositiveBigIntegerField()
    created_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["conversation", "agent", "position"], name="extracted_message_uniq"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.agent_id} extracted #{self.position} of {self.conversation_id}"
