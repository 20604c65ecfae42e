"""The staff overview: counts, open conflicts, the last Dream runs, embeddings pending, the last day's errors
and the busiest agents, at both screen widths."""

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from activity.models import ToolCall
from apikeys.services import apikey_create
from dream.models import DreamRun
from tests.factories import AgentFactory, MemoryEntryFactory

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_overview_shows_what_the_platform_holds_and_what_needs_a_look(
    page, django_assert_max_num_queries
):
    now = timezone.now()
    busy, calm = AgentFactory(id="busy-bot"), AgentFactory(id="calm-bot")
    apikey_create(role="agent", agent_id=busy.id, label="live")
    revoked, _ = apikey_create(role="agent", agent_id=calm.id, label="old")
    revoked.revoked_at = now
    revoked.save()
    for user in ("u1", "u2", "u3"):
        MemoryEntryFactory(user_id=user, key="city", value="Berlin", source_agent=busy)
    MemoryEntryFactory(user_id="u1", key="city", value="Hamburg", source_agent=calm, conflicted=True)
    MemoryEntryFactory(user_id="u1", key="tz", value="CET", source_agent=calm)
    for index in range(7):
        ToolCall.objects.create(agent=busy, tool="searchMemory", success=index > 0, created_at=now)
    ToolCall.objects.create(agent=calm, tool="searchMemory", created_at=now)
    ToolCall.objects.create(agent=calm, tool="old", success=False, created_at=now - timedelta(days=3))
    DreamRun.objects.create(status="succeeded", started_at=now - timedelta(hours=2), heartbeat_at=now)
    DreamRun.objects.create(status="failed", started_at=now, heartbeat_at=now, error="the LLM timed out")

    page.click("#overview-link")
    page.wait_for_selector("#overview-counts")
    page.shots("overview")
    text = {
        name: page.inner_text(f"#{name}")
        for name in (
            "count-users",
            "count-entries",
            "count-agents",
            "count-keys",
            "open-conflicts",
            "failed-runs",
            "failed-calls",
            "embeddings-pending",
        )
    }
    pending = text.pop("embeddings-pending")
    assert re.fullmatch(r"5 \(the oldest waiting \d+ s\)", pending), pending  # queued as written
    assert text == {
        "count-users": "3",
        "count-entries": "5",
        "count-agents": "2",
        "count-keys": "1",
        "open-conflicts": "1",
        "failed-runs": "1",
        "failed-calls": "1",
    }
    busiest = page.locator("#overview-busiest tbody tr")
    assert busiest.first.inner_text().split() == ["busy-bot", "7", "1"]
    assert busiest.nth(1).inner_text().split() == ["calm-bot", "1", "0"]
    runs = page.locator("#overview-runs tbody tr")
    assert runs.count() == 2 and "failed" in runs.first.inner_text()
    assert "the LLM timed out" in runs.first.inner_text()

    # A bounded number of statements, whatever the tables hold.
    from django.test import Client

    client = Client()
    client.force_login(page.staff)
    with django_assert_max_num_queries(16):
        assert client.get("/admin/overview/").status_code == 200
