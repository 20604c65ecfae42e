"""The staff overview (``/admin/overview/``): what the platform holds and how it runs, from each app's
selectors, each cheap on tables of millions of rows. Part of the composition root (it reads every app, as
urls.py, which mounts it, does)."""

from datetime import timedelta
from typing import Any

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils import timezone

from activity.selectors import tool_call_busiest, tool_call_failures_since
from apikeys.selectors import agent_key_counts
from dream.selectors import dream_failed_since, dream_recent_runs
from memoryplatform.embeddings import get_embedder
from memoryplatform.replica import replica_door
from usermemory.stats import memory_overview


def overview_numbers() -> dict[str, Any]:
    since = timezone.now() - timedelta(days=1)
    return {
        **agent_key_counts(),
        **memory_overview(),
        "embedder": get_embedder() is not None,
        "runs": dream_recent_runs(limit=5),
        "failedRuns": dream_failed_since(since=since),
        "failedToolCalls": tool_call_failures_since(since=since),
        "busiest": tool_call_busiest(since=since, limit=5),
        "since": since,
    }


@replica_door
def overview_view(request: HttpRequest) -> HttpResponse:
    context = {
        **admin.site.each_context(request),
        "title": "Overview",
        "o": overview_numbers(),
    }
    return TemplateResponse(request, "admin/overview.html", context)
