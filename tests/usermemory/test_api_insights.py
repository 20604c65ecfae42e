"""Insights (seed 001): an entry's confidence and source at every write door, shown by every read,
filtered by minConfidence in list, recall and search; an agent's entries (``?agentId=``) as the caller
sees them."""

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from tests.helpers import assert_envelope
from usermemory.models import MemoryEntry

BASE = "/usermemorystore/memories"
U = "user-insights"


def put(client, key, **body):
    response = client.put(BASE, {"userId": U, "key": key, "value": f"{key} value", **body}, format="json")
    assert response.status_code in (200, 201), response.content
    return response.json()


def keys(response):
    assert response.status_code == 200, response.content
    return sorted(entry["key"] for entry in response.json())


def test_rest_writes_and_reads_confidence_and_source(agent_a_api):
    created = put(agent_a_api, "diet", confidence=0.9, source="user_correction")
    assert created["confidence"] == 0.9 and created["source"] == "user_correction"
    stored = agent_a_api.get(f"{BASE}/{U}/key/diet").json()
    assert stored["confidence"] == 0.9 and stored["source"] == "user_correction"
    # A write says everything about the entry: left out, they are unsaid again.
    assert put(agent_a_api, "diet")["confidence"] is None
    assert agent_a_api.get(f"{BASE}/{U}/key/diet").json()["source"] is None

    batch = agent_a_api.put(
        f"{BASE}/batch",
        [{"userId": U, "key": "tone", "value": "dry", "confidence": 0.4, "source": "noticed twice"}],
        format="json",
    )
    assert batch.status_code in (200, 201), batch.content
    tone = MemoryEntry.objects.get(key="tone")
    assert (tone.confidence, tone.source) == (0.4, "noticed twice")


@pytest.mark.parametrize(
    "extra",
    [
        {"confidence": 1.5},
        {"confidence": -0.1},
        {"confidence": "high"},
        {"confidence": True},
        {"source": "s" * 201},
    ],
)
def test_bad_insights_are_a_400_and_write_nothing(agent_a_api, extra):
    response = agent_a_api.put(BASE, {"userId": U, "key": "k", "value": "v", **extra}, format="json")
    assert_envelope(response, 400, "bad_request")
    assert not MemoryEntry.objects.exists()


@pytest.fixture
def graded(agent_a_api, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):  # their vectors, for the ranked reads
        put(agent_a_api, "coffee_sure", value="likes black coffee", confidence=0.9)
        put(agent_a_api, "coffee_maybe", value="likes coffee with milk", confidence=0.3)
        put(agent_a_api, "coffee_unsaid", value="drinks coffee daily")


@pytest.mark.parametrize(
    "path",
    [
        "",
        "/visible",
        "/visible?q=coffee",
        "/visible?q=coffee&mode=semantic",
        "/search?q=coffee",
        "/search?q=coffee&mode=hybrid",
        "/search?q=coffee&mode=semantic",
    ],
)
def test_min_confidence_filters_list_recall_and_search(graded, agent_a_api, path):
    url = f"{BASE}/{U}{path}"
    joiner = "&" if "?" in url else "?"
    assert keys(agent_a_api.get(url)) == ["coffee_maybe", "coffee_sure", "coffee_unsaid"]
    assert keys(agent_a_api.get(f"{url}{joiner}minConfidence=0.5")) == ["coffee_sure"]
    assert keys(agent_a_api.get(f"{url}{joiner}minConfidence=0")) == ["coffee_maybe", "coffee_sure"]


@pytest.mark.parametrize("value", ["1.5", "-1", "high", "nan", "inf"])
def test_a_bad_min_confidence_is_a_400(agent_a_api, value, db):
    assert_envelope(agent_a_api.get(f"{BASE}/{U}/visible", {"minConfidence": value}), 400, "bad_request")


def test_an_agents_entries_as_the_caller_may_see_them(agent_a_api, agent_b_api, admin_api):
    put(agent_a_api, "a_global", visibility="global", confidence=0.7, source="observed_pattern")
    put(agent_a_api, "a_self")
    put(agent_b_api, "b_global", visibility="global")
    put(agent_b_api, "b_self")

    assert keys(agent_b_api.get(f"{BASE}/{U}", {"agentId": "agent-a"})) == ["a_global"]
    assert keys(agent_a_api.get(f"{BASE}/{U}", {"agentId": "agent-a"})) == ["a_global", "a_self"]
    assert keys(admin_api.get(f"{BASE}/{U}", {"agentId": "agent-a"})) == ["a_global", "a_self"]
    insight = agent_b_api.get(f"{BASE}/{U}", {"agentId": "agent-a", "minConfidence": 0.5}).json()
    assert [(e["key"], e["confidence"], e["source"]) for e in insight] == [
        ("a_global", 0.7, "observed_pattern")
    ]


def test_the_llm_tool_writes_them(agent_a_api):
    body = {
        "userId": U,
        "arguments": {
            "key": "size",
            "value": "M",
            "category": "fact",
            "confidence": 0.6,
            "source": "task_outcome",
        },
    }
    assert agent_a_api.post("/v1/tools/rememberFact/invoke", body, format="json").status_code == 200
    entry = MemoryEntry.objects.get(key="size")
    assert (entry.confidence, entry.source) == (0.6, "task_outcome")
    body["arguments"]["confidence"] = 2
    refused = agent_a_api.post("/v1/tools/rememberFact/invoke", body, format="json").json()["result"]
    assert refused == "❌ Not remembered: confidence must be a number from 0 to 1."
    assert MemoryEntry.objects.get(key="size").confidence == 0.6


def test_the_admin_shows_and_filters_them(agent_a_api, client, db):
    put(agent_a_api, "corrected", confidence=0.95, source="user_correction")
    put(agent_a_api, "guessed", confidence=0.2, source="observed_pattern")
    client.force_login(User.objects.create_superuser("boss", "boss@example.com", "pw-for-tests-only"))

    response = client.get(reverse("admin:usermemory_memoryentry_changelist") + "?source=user_correction")

    assert response.status_code == 200
    assert [e.key for e in response.context["cl"].result_list] == ["corrected"]
    assert "0.95" in response.content.decode()
