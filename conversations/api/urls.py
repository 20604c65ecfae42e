"""memory-service's conversation paths under ``/v1/conversations``, each with and without a trailing slash."""

from conversations.api import views
from memoryplatform.routing import api_path

BASE = "v1/conversations"
ONE = f"{BASE}/<conversation_id>"

urlpatterns = [
    api_path(BASE, views.ConversationListCreateView.as_view(), name="conversation-list"),
    # Before ONE, whose id would take "search".
    api_path(f"{BASE}/search", views.MessageSearchView.as_view(), name="conversation-search"),
    api_path(f"{ONE}/messages", views.MessagesView.as_view(), name="conversation-messages"),
    api_path(f"{ONE}/memory/messages/sync", views.MemorySyncView.as_view(), name="conversation-memory-sync"),
    api_path(f"{ONE}/checkpoint", views.CheckpointView.as_view(), name="conversation-checkpoint"),
    api_path(f"{ONE}/context", views.ContextView.as_view(), name="conversation-context"),
    api_path(ONE, views.ConversationDetailView.as_view(), name="conversation-detail"),
]
