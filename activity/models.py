"""What agents did and do: the tool-call log and tasks (seed 001, issue 21), and what their LLM calls cost
(issue 44)."""

from django.core.serializers.json import DjangoJSONEncoder
from django.db import models
from django.db.models import Q

from apikeys.models import Agent
from usermemory.models import Visibility


class ActivityPolicy(models.Model):
    """An agent's activity settings (``memoryPolicy.toolCallRetentionDays`` and ``llmBudget``), one-to-one
    with the agent; an agent without a row has the defaults. Written through
    :func:`usermemory.governance.policy_update` with the agent's other policy parts, in one transaction."""

    agent = models.OneToOneField(
        Agent, primary_key=True, on_delete=models.CASCADE, related_name="activity_policy"
    )
    tool_call_retention_days = models.PositiveIntegerField(
        default=30, help_text="Dream deletes this agent's tool-call log older than this; 0 keeps it forever"
    )
    llm_budget = models.DecimalField(
        max_digits=8,
        decimal_places=2,
        null=True,
        blank=True,
        help_text="Dollars this agent's LLM calls may spend in any LLM_BUDGET_WINDOW, at every door; "
        "empty: LLM_BUDGET_PER_AGENT",
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "activity policy"
        verbose_name_plural = "activity policies"

    def __str__(self) -> str:
        return f"activity policy of {self.agent_id}"


class ToolCall(models.Model):
    """One call of a tool by an agent: logged by the agent over REST, or by our own LLM and MCP tools.

    ``result`` is JSON or text (a JSON string), bounded by ``ACTIVITY_MAX_CHARS`` as ``args`` is.
    Rows older than the agent's ``toolCallRetentionDays`` (its memory policy) are deleted by Dream.
    """

    class Via(models.TextChoices):
        REST = "rest", "rest"
        LLM_TOOL = "llm_tool", "LLM tool"
        MCP = "mcp", "MCP"

    # No index of its own: the indexes below lead with the agent.
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="tool_calls", db_index=False)
    tool = models.CharField(max_length=128)
    args = models.JSONField(null=True, blank=True, encoder=DjangoJSONEncoder)
    result = models.JSONField(null=True, blank=True, encoder=DjangoJSONEncoder)
    success = models.BooleanField(default=True)
    duration_ms = models.PositiveIntegerField(null=True, blank=True)
    error = models.TextField(blank=True)
    task_id = models.CharField(max_length=64, blank=True)
    conversation_id = models.CharField(max_length=255, blank=True)
    session_id = models.CharField(max_length=255, blank=True)
    via = models.CharField(max_length=8, choices=Via.choices, default=Via.REST)
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            # An agent's log, newest first (keyset on created_at, id), and Dream's retention pass.
            models.Index(fields=["agent", "-created_at", "-id"], name="toolcall_agent_recent_idx"),
            models.Index(fields=["agent", "tool", "-created_at"], name="toolcall_agent_tool_idx"),
            models.Index(fields=["task_id"], condition=~Q(task_id=""), name="toolcall_task_idx"),
            models.Index(fields=["-created_at", "-id"], name="toolcall_recent_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.agent_id}: {self.tool} ({'ok' if self.success else 'failed'})"


class Task(models.Model):
    """A unit of work one agent (``creator``) gives another, or itself (``assignee``).

    Done with a ``user_id``, its result is stored as a memory of that user (category ``task_result``, with
    the task's visibility, owned by the assignee), in the same transaction: ``memory_entry`` points at it.
    """

    class Status(models.TextChoices):
        PENDING = "pending", "pending"
        IN_PROGRESS = "in_progress", "in progress"
        DONE = "done", "done"
        FAILED = "failed", "failed"
        CANCELLED = "cancelled", "cancelled"

    # No indexes of their own: the indexes below lead with them.
    creator = models.ForeignKey(Agent, models.CASCADE, related_name="tasks_created", db_index=False)
    assignee = models.ForeignKey(Agent, models.CASCADE, related_name="tasks_assigned", db_index=False)
    title = models.CharField(max_length=500)
    user_id = models.CharField(max_length=255, blank=True)
    context = models.JSONField(default=dict, blank=True, encoder=DjangoJSONEncoder)
    status = models.CharField(max_length=11, choices=Status.choices, default=Status.PENDING)
    result = models.JSONField(null=True, blank=True, encoder=DjangoJSONEncoder)
    visibility = models.CharField(max_length=6, choices=Visibility.choices, default=Visibility.SELF)
    group_ids = models.JSONField(default=list, blank=True)
    memory_entry = models.ForeignKey(
        "usermemory.MemoryEntry",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="The memory its result was stored as, when done with a user.",
    )
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=["pending", "in_progress", "done", "failed", "cancelled"]),
                name="task_status_valid",
            ),
            models.CheckConstraint(
                condition=Q(visibility__in=["self", "group", "global"]), name="task_visibility_valid"
            ),
        ]
        indexes = [
            models.Index(fields=["assignee", "status", "-created_at"], name="task_assignee_idx"),
            models.Index(fields=["creator", "status", "-created_at"], name="task_creator_idx"),
            models.Index(fields=["status", "-created_at"], name="task_status_idx"),
        ]

    def __str__(self) -> str:
        return f"#{self.pk} {self.title} ({self.status})"


class LlmSpend(models.Model):
    """One LLM call made for an agent, whatever door made it: what it cost (``settled``), or, until it
    answered, the estimate reserved for it. An agent's LLM budget is the sum of its rows over the last
    ``LLM_BUDGET_WINDOW`` (:mod:`activity.budget`); Dream deletes the rows older than that. No user's data:
    the agent, the use, the dollars and the time."""

    class Use(models.TextChoices):
        EXTRACTION = "extraction", "extraction"
        SUMMARY = "summary", "Dream summary"
        CONFIRMATION = "confirmation", "Dream confirmation"
        RERANK = "rerank", "rerank (RERANK_PROVIDER=llm)"

    # No index of its own: the index below leads with the agent.
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="+", db_index=False)
    use = models.CharField(max_length=12, choices=Use.choices)
    cost = models.DecimalField(
        max_digits=12,
        decimal_places=6,
        help_text="Dollars: the provider's usage, or the estimate until then.",
    )
    settled = models.BooleanField(default=False, help_text="The call answered (or failed): cost is its own.")
    at = models.DateTimeField()

    class Meta:
        ordering = ["-at", "-id"]
        verbose_name = "LLM spending"
        verbose_name_plural = "LLM spending"
        constraints = [
            models.CheckConstraint(
                condition=Q(use__in=["extraction", "summary", "confirmation", "rerank"]),
                name="llmspend_use_valid",
            ),
            models.CheckConstraint(condition=Q(cost__gte=0), name="llmspend_cost_not_negative"),
        ]
        indexes = [models.Index(fields=["agent", "at"], name="llmspend_agent_at_idx")]

    def __str__(self) -> str:
        return f"{self.agent_id}: ${self.cost} ({self.use})"
