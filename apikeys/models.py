"""Who is calling: agents (the directory), agent groups, and API keys bound to a role."""

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models
from django.db.models import Q

AGENT_ID_VALIDATOR = RegexValidator(
    r"^[a-z0-9][a-z0-9_-]{0,63}$",
    "An id is 1-64 lowercase letters, digits, '-' or '_', starting with a letter or digit.",
)


class Agent(models.Model):
    """A registered client such as ``support-bot``: the agent directory of seed 001."""

    class Status(models.TextChoices):
        ACTIVE = "active", "active"
        IDLE = "idle", "idle"
        UNAVAILABLE = "unavailable", "unavailable"

    id = models.CharField(primary_key=True, max_length=64, validators=[AGENT_ID_VALIDATOR])
    display_name = models.CharField(max_length=200, blank=True)
    capabilities = models.JSONField(default=list, blank=True)
    model = models.CharField(max_length=200, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ACTIVE)
    last_active_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["status"], name="agent_status_idx")]

    def __str__(self) -> str:
        return self.id


class AgentGroup(models.Model):
    """A named set of agents: a group conversation, a swarm. An agent is in many groups."""

    id = models.CharField(primary_key=True, max_length=64, validators=[AGENT_ID_VALIDATOR])
    name = models.CharField(max_length=200, blank=True)
    members = models.ManyToManyField(Agent, related_name="groups", blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return self.id


class ApiKey(models.Model):
    """A key bound to a role. Only its SHA-256 digest is stored, next to a short lookup prefix."""

    class Role(models.TextChoices):
        AGENT = "agent", "agent"
        VIEWER = "viewer", "viewer"
        ADMIN = "admin", "admin"

    prefix = models.CharField(max_length=16, unique=True, editable=False)
    digest = models.CharField(max_length=64, editable=False)
    role = models.CharField(max_length=8, choices=Role.choices)
    agent = models.ForeignKey(Agent, null=True, blank=True, on_delete=models.CASCADE, related_name="api_keys")
    label = models.CharField(max_length=200, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "API key"
        constraints = [
            models.CheckConstraint(
                condition=(Q(role="agent") & Q(agent__isnull=False))
                | (~Q(role="agent") & Q(agent__isnull=True)),
                name="apikey_agent_iff_agent_role",
                violation_error_message="An agent key is bound to exactly one agent; other roles to none.",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.prefix} ({self.role})"
