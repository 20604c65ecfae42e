"""EDDI's paths (``/usermemorystore/memories``, ``/propertiesstore/properties``) and ``/v1`` extras."""

from django.urls import path

from usermemory.api import views

MEMORIES = "usermemorystore/memories"

urlpatterns = [
    path(MEMORIES, views.MemoryUpsertView.as_view(), name="memory-upsert"),
    path(f"{MEMORIES}/batch", views.MemoryBatchView.as_view(), name="memory-batch"),
    path(f"{MEMORIES}/entry/<int:entry_id>", views.MemoryEntryView.as_view(), name="memory-entry"),
    path(
        f"{MEMORIES}/entry/<int:entry_id>/history", views.MemoryHistoryView.as_view(), name="memory-history"
    ),
    path(f"{MEMORIES}/<str:user_id>", views.MemoryUserView.as_view(), name="memory-user"),
    path(f"{MEMORIES}/<str:user_id>/visible", views.MemoryVisibleView.as_view(), name="memory-visible"),
    path(f"{MEMORIES}/<str:user_id>/search", views.MemorySearchView.as_view(), name="memory-search"),
    path(
        f"{MEMORIES}/<str:user_id>/category/<str:category>",
        views.MemoryCategoryView.as_view(),
        name="memory-category",
    ),
    path(f"{MEMORIES}/<str:user_id>/key/<path:key>", views.MemoryKeyView.as_view(), name="memory-key"),
    path(f"{MEMORIES}/<str:user_id>/count", views.MemoryCountView.as_view(), name="memory-count"),
    path(f"{MEMORIES}/<str:user_id>/export", views.MemoryExportView.as_view(), name="memory-export"),
    path("propertiesstore/properties/<str:user_id>", views.PropertiesView.as_view(), name="properties"),
    path("v1/memories/search", views.MemorySearchAllView.as_view(), name="memory-search-all"),
    path("v1/agents/<str:agent_id>", views.AgentDetailView.as_view(), name="agent-detail"),
]
