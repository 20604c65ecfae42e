from rest_framework import serializers

from apikeys.models import AGENT_ID_VALIDATOR, Agent, AgentGroup, ApiKey
from memoryplatform.api.serializers import StrictInput

# A name newcomers send for the agent's display name (the directory calls it displayName everywhere).
_AGENT_HINTS = {"name": "displayName", "display_name": "displayName"}


class AgentOutputSerializer(serializers.ModelSerializer):
    displayName = serializers.CharField(source="display_name")
    capabilities = serializers.ListField(child=serializers.CharField(), help_text="What the agent can do.")
    lastActiveAt = serializers.DateTimeField(source="last_active_at", allow_null=True)
    createdAt = serializers.DateTimeField(source="created_at")
    updatedAt = serializers.DateTimeField(source="updated_at")
    groups = serializers.SerializerMethodField()

    class Meta:
        model = Agent
        fields = [
            "id",
            "displayName",
            "capabilities",
            "model",
            "status",
            "lastActiveAt",
            "groups",
            "createdAt",
            "updatedAt",
        ]

    def get_groups(self, agent: Agent) -> list[str]:
        return sorted(group.id for group in agent.groups.all())


class AgentPublicOutputSerializer(serializers.ModelSerializer):
    """An agent as other agents see it in the directory: never its keys, groups or policy."""

    displayName = serializers.CharField(source="display_name")
    capabilities = serializers.ListField(child=serializers.CharField(), help_text="What the agent can do.")
    lastActiveAt = serializers.DateTimeField(source="last_active_at", allow_null=True)

    class Meta:
        model = Agent
        fields = ["id", "displayName", "capabilities", "model", "status", "lastActiveAt"]


class AgentCreateInputSerializer(StrictInput):
    returned_by = AgentOutputSerializer
    hints = _AGENT_HINTS

    id = serializers.CharField(max_length=64, validators=[AGENT_ID_VALIDATOR])
    displayName = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    capabilities = serializers.ListField(
        child=serializers.CharField(max_length=200), required=False, default=list
    )
    model = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    status = serializers.ChoiceField(
        choices=Agent.Status.choices, required=False, default=Agent.Status.ACTIVE
    )
    groups = serializers.ListField(child=serializers.CharField(max_length=64), required=False, default=list)


class AgentUpdateInputSerializer(StrictInput):
    """The profile fields of a PATCH. Groups change through ``/v1/groups/{id}/members``."""

    returned_by = AgentOutputSerializer
    hints = _AGENT_HINTS

    displayName = serializers.CharField(
        max_length=200, required=False, allow_blank=True, source="display_name"
    )
    capabilities = serializers.ListField(child=serializers.CharField(max_length=200), required=False)
    model = serializers.CharField(max_length=200, required=False, allow_blank=True)
    status = serializers.ChoiceField(choices=Agent.Status.choices, required=False)


class GroupOutputSerializer(serializers.ModelSerializer):
    members = serializers.SerializerMethodField()
    createdAt = serializers.DateTimeField(source="created_at")

    class Meta:
        model = AgentGroup
        fields = ["id", "name", "members", "createdAt"]

    def get_members(self, group: AgentGroup) -> list[str]:
        return sorted(agent.id for agent in group.members.all())


class GroupCreateInputSerializer(StrictInput):
    returned_by = GroupOutputSerializer

    id = serializers.CharField(max_length=64, validators=[AGENT_ID_VALIDATOR])
    name = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    members = serializers.ListField(child=serializers.CharField(max_length=64), required=False, default=list)


class GroupMembersInputSerializer(StrictInput):
    agentIds = serializers.ListField(child=serializers.CharField(max_length=64), allow_empty=False)


class ApiKeyOutputSerializer(serializers.ModelSerializer):
    """A key as listed: never its secret (only a digest is stored)."""

    agentId = serializers.CharField(source="agent_id", allow_null=True)
    createdAt = serializers.DateTimeField(source="created_at")
    expiresAt = serializers.DateTimeField(source="expires_at", allow_null=True)
    lastUsedAt = serializers.DateTimeField(source="last_used_at", allow_null=True)
    revokedAt = serializers.DateTimeField(source="revoked_at", allow_null=True)

    class Meta:
        model = ApiKey
        fields = ["prefix", "role", "agentId", "label", "createdAt", "expiresAt", "lastUsedAt", "revokedAt"]


class ApiKeyCreatedOutputSerializer(ApiKeyOutputSerializer):
    """The answer to making a key (the view adds ``key``, which the model never holds)."""

    key = serializers.CharField(help_text="The raw key. Shown this once: only its digest is stored.")

    class Meta(ApiKeyOutputSerializer.Meta):
        fields = [*ApiKeyOutputSerializer.Meta.fields, "key"]


class ApiKeyCreateInputSerializer(StrictInput):
    label = serializers.CharField(  # type: ignore[assignment]  # a declared field: DRF takes it off the class
        max_length=200, required=False, allow_blank=True, default=""
    )
    expiresAt = serializers.DateTimeField(
        required=False, allow_null=True, default=None, help_text="When the key stops working; never if null."
    )
