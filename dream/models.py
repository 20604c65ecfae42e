"""Dream's policy (:class:`DreamPolicy`, an agent's ``dreamConfig``) and its cycle records: one
:class:`DreamRun` per cycle, whatever started it and however it ended."""

from datetime import timedelta

from django.db import models
from django.db.models import Q

from apikeys.models import Agent
from usermemory.models import MAX_KEY_CHARS, SummarizeGroupBy


class DreamPolicy(models.Model):
    """An agent's Dream settings (``memoryPolicy.dreamConfig``), one-to-one with the agent: whether Dream runs
    for it, what its cycle may spend, and each pass's own settings (:mod:`dream.passes` names which pass
    reads which). An agent without a row has the defaults. Written through
    :func:`usermemory.governance.policy_update` with the agent's other policy parts, in one transaction."""

    agent = models.OneToOneField(
        Agent, primary_key=True, on_delete=models.CASCADE, related_name="dream_policy"
    )
    dream_enabled = models.BooleanField(default=False)
    cross_agent_maintenance = models.BooleanField(default=False)
    max_cost_per_run = models.DecimalField(
        max_digits=8,
        decimal_places=2,
        default=0.50,
        help_text="Dollars of LLM calls one Dream cycle may spend",
    )
    max_llm_calls_per_run = models.PositiveIntegerField(
        default=100,
        help_text="LLM calls one Dream cycle may make in all (summaries, confirmations), whatever they cost",
    )
    max_llm_calls_per_user = models.PositiveIntegerField(
        default=10, help_text="LLM calls one Dream cycle may make about one user"
    )
    prune_stale_after_days = models.PositiveIntegerField(default=90, help_text="0 disables pruning")
    prune_expired_after_days = models.PositiveIntegerField(
        default=30, help_text="Dream deletes entries past their validTo for this long; 0 keeps them"
    )
    summarize_interactions = models.BooleanField(default=False)
    summarize_min_entries = models.PositiveIntegerField(
        default=10, help_text="A group of at least this many entries is summarised"
    )
    summarize_target_entries = models.PositiveIntegerField(
        default=3, help_text="A group becomes at most this many summaries"
    )
    summarize_group_by = models.CharField(
        max_length=16,
        choices=SummarizeGroupBy.choices,
        default=SummarizeGroupBy.CATEGORY,
        help_text="category, or key_prefix: a key's part before its first '.', ':' or '/'",
    )
    preserve_agent_provenance = models.BooleanField(
        default=True, help_text="A summary's provenance names the agents that wrote its sources"
    )
    summarize_requires_approval = models.BooleanField(
        default=False, help_text="Summaries wait for staff approval on the Dream run's page before any write"
    )
    detect_contradictions = models.BooleanField(default=True)
    confirm_contradictions_with_llm = models.BooleanField(
        default=False, help_text="The LLM confirms each contradiction by meaning (within maxCostPerRun)"
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "Dream policy"
        verbose_name_plural = "Dream policies"

    def __str__(self) -> str:
        return f"Dream policy of {self.agent_id}"


class DreamRun(models.Model):
    """One Dream cycle: when it ran, how it ended, and what it did.

    One real (not dry) cycle runs at a time: a session advisory lock decides (``dream.cycle``), not this
    table. ``heartbeat_at`` is progress only (the last committed batch), never a lease.
    """

    class Status(models.TextChoices):
        RUNNING = "running", "running"
        SUCCEEDED = "succeeded", "succeeded"
        FAILED = "failed", "failed"
        SKIPPED = "skipped", "skipped"

    class Approval(models.TextChoices):
        NONE = "", "none"
        PENDING = "pending", "pending"
        APPROVED = "approved", "approved"
        REJECTED = "rejected", "rejected"

    class Trigger(models.TextChoices):
        SCHEDULE = "schedule", "schedule"
        MANUAL = "manual", "manual"
        ADMIN = "admin", "admin"

    trigger = models.CharField(max_length=8, choices=Trigger.choices, default=Trigger.MANUAL)
    dry_run = models.BooleanField(default=False, help_text="Counted what it would do; changed nothing.")
    only_agent = models.CharField(
        max_length=64, blank=True, help_text="The one agent this cycle ran for; blank for every agent."
    )
    status = models.CharField(max_length=9, choices=Status.choices, default=Status.RUNNING)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(help_text="Progress: refreshed after every committed batch.")
    agents_processed = models.PositiveIntegerField(default=0)
    users_processed = models.PositiveIntegerField(default=0)
    entries_pruned = models.PositiveIntegerField(default=0)
    contradictions_found = models.PositiveIntegerField(
        default=0,
        help_text="Conflict sets newly flagged: a user's entries that disagree on a key, with their partners "
        "by meaning.",
    )
    entries_flagged = models.PositiveIntegerField(default=0)
    entries_unflagged = models.PositiveIntegerField(default=0)
    entries_summarized = models.PositiveIntegerField(
        default=0, help_text="Entries superseded by a summary (a dry run: that would be)."
    )
    summaries_written = models.PositiveIntegerField(default=0)
    summarization_failures = models.PositiveIntegerField(
        default=0,
        help_text="Groups whose LLM call failed (error, timeout, malformed answer): nothing changed.",
    )
    llm_cost = models.DecimalField(
        "LLM cost",
        max_digits=12,
        decimal_places=6,
        default=0,
        help_text="Dollars spent on LLM calls, from their usage.",
    )
    approval = models.CharField(
        max_length=8,
        choices=Approval.choices,
        blank=True,
        help_text="pending: its summaries wait for staff approval (summarizeRequiresApproval).",
    )
    error = models.TextField(blank=True)
    details = models.JSONField(
        default=dict, blank=True, help_text="Per-agent counts; summaries: proposals, failures, the cost cap."
    )

    class Meta:
        ordering = ["-started_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=["running", "succeeded", "failed", "skipped"]),
                name="dream_run_status_valid",
            ),
        ]
        indexes = [models.Index(fields=["status", "-started_at"], name="dream_run_status_idx")]
        permissions = [("run_dream", "Can start a Dream cycle now")]

    def __str__(self) -> str:
        return f"Dream run #{self.pk} ({self.status})"

    @property
    def duration(self) -> timedelta | None:
        if self.finished_at is None:
            return None
        return self.finished_at - self.started_at


class KeyVector(models.Model):
    """A key's vector as Dream's contradictions by meaning compare keys (``"the user's <key>"``,
    :mod:`dream.meaning`), unit length, float32, one per embedding model and key: each key is embedded once,
    not in every cycle. Across users by design (the keys are a shared vocabulary), so no ``user_id``: a key
    no entry holds any more is removed, at a user's erasure and by each cycle's housekeeping
    (:mod:`dream.store`)."""

    model = models.CharField(max_length=200)
    key = models.CharField(max_length=MAX_KEY_CHARS)
    vector = models.BinaryField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["model", "key"], name="dream_keyvector_model_key")]

    def __str__(self) -> str:
        return f"{self.key} ({self.model})"
