"""EDDI's paths (``/usermemorystore/memories``, ``/propertiesstore/properties``) and ``/v1`` extras.

Each answers with and without a trailing slash; a value may hold "/" (``memoryplatform.routing``), so the
routes with a fixed suffix after ``<user_id>`` come before the bare one.
"""

from memoryplatform.routing import api_path
from usermemory.api import views

MEMORIES = "usermemorystore/memories"
USER = f"{MEMORIES}/<text:user_id>"

urlpatterns = [
    api_path(MEMORIES, views.MemoryUpsertView.as_view(), name="memory-upsert"),
    api_path(f"{MEMORIES}/batch", views.MemoryBatchView.as_view(), name="memory-batch"),
    api_path(f"{MEMORIES}/entry/<entry:entry_id>", views.MemoryEntryView.as_view(), name="memory-entry"),
    api_path(
        f"{MEMORIES}/entry/<entry:entry_id>/history", views.MemoryHistoryView.as_view(), name="memory-history"
    ),
    api_path(f"{USER}/visible", views.MemoryVisibleView.as_view(), name="memory-visible"),
    api_path(f"{USER}/search", views.MemorySearchView.as_view(), name="memory-search"),
    api_path(f"{USER}/category/<text:category>", views.MemoryCategoryView.as_view(), name="memory-category"),
    api_path(f"{USER}/key/<text:key>", views.MemoryKeyView.as_view(), name="memory-key"),
    api_path(f"{USER}/ttl-refresh", views.MemoryTtlRefreshView.as_view(), name="memory-ttl-refresh"),
    api_path(f"{USER}/count", views.MemoryCountView.as_view(), name="memory-count"),
    api_path(f"{USER}/export", views.MemoryExportView.as_view(), name="memory-export"),
    api_path(USER, views.MemoryUserView.as_view(), name="memory-user"),
    api_path("propertiesstore/properties/<text:user_id>", views.PropertiesView.as_view(), name="properties"),
    api_path("v1/memories/search", views.MemorySearchAllView.as_view(), name="memory-search-all"),
    api_path("v1/agents/<agent_id>", views.AgentDetailView.as_view(), name="agent-detail"),
]
