"""What agents did: the tool-call log (seed 001, issue 21)."""

from django.core.serializers.json import DjangoJSONEncoder
from django.db import models
from django.db.models import Q

from apikeys.models import Agent


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
