from django.urls import path

from apikeys.api import views

urlpatterns = [
    path("agents/me", views.AgentMeView.as_view(), name="agent-me"),
    path("agents", views.AgentListCreateView.as_view(), name="agent-list"),
    path("groups", views.GroupListCreateView.as_view(), name="group-list"),
    path("groups/<str:group_id>/members", views.GroupMembersView.as_view(), name="group-members"),
    path(
        "groups/<str:group_id>/members/<str:agent_id>",
        views.GroupMemberDeleteView.as_view(),
        name="group-member-delete",
    ),
]
