"""The agent directory, groups and keys under ``/v1``, each with and without a trailing slash."""

from apikeys.api import views
from memoryplatform.routing import api_path

urlpatterns = [
    api_path("v1/agents/me", views.AgentMeView.as_view(), name="agent-me"),
    api_path("v1/agents", views.AgentListCreateView.as_view(), name="agent-list"),
    api_path("v1/agents/<agent_id>/keys", views.AgentKeysView.as_view(), name="agent-keys"),
    api_path("v1/keys/<prefix>", views.KeyRevokeView.as_view(), name="key-revoke"),
    api_path("v1/groups", views.GroupListCreateView.as_view(), name="group-list"),
    api_path(
        "v1/groups/<group_id>/members/<agent_id>",
        views.GroupMemberDeleteView.as_view(),
        name="group-member-delete",
    ),
    api_path("v1/groups/<group_id>/members", views.GroupMembersView.as_view(), name="group-members"),
]
