"""memory-service's conversation paths under ``/v1/conversations``."""

from django.urls import path

from conversations.api import views

BASE = "v1/conversations"
ONE = f"{BASE}/<str:conversation_id>"

urlpatterns = [
    path(BASE, views.ConversationCreateView.as_view(), name="conversation-create"),
    path(ONE, views.ConversationDetailView.as_view(), name="conversation-detail"),
    path(f"{ONE}/messages", views.MessagesView.as_view(), name="conversation-messages"),
    path(f"{ONE}/memory/messages/sync", views.MemorySyncView.as_view(), name="conversation-memory-sync"),
    path(f"{ONE}/checkpoint", views.CheckpointView.as_view(), name="conversation-checkpoint"),
    path(f"{ONE}/context", views.ContextView.as_view(), name="conversation-context"),
]
