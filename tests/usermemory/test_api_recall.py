"""Recall order, the most_accessed recency reservation, access counting, and query bounds."""

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.utils import timezone

from usermemory.models import MemoryEntry
from usermemory.services import recall_split

BASE = "/usermemorystore/memories"
U = "user-r"


@pytest.mark.parametrize(("n", "reserved"), [(1, 0), (2, 1), (5, 1), (10, 2), (50, 10)])
def test_recall_split(n, reserved):
    assert recall_split(n) == reserved


def _seed(admin_api, count):
    """``count`` global entries; entry i was updated i minutes ago and accessed (count - i) * 10 times...
    except that the most accessed are the oldest, so recency and access disagree."""
    now = timezone.now()
    for i in range(count):
        admin_api.put(
            BASE, {"userId": U, "key": f"k{i:02d}", "value": i, "visibility": "global"}, format="json"
        )
    for i in range(count):
        MemoryEntry.objects.filter(key=f"k{i:02d}").update(
            updated_at=now - timedelta(minutes=count - i), access_count=1000 - i * 10
        )
    # k(count-1) is the newest; k00 the most accessed.


@pytest.mark.parametrize("n", [1, 2, 5, 10, 50])
def test_most_accessed_reserves_recent_slots(admin_api, agent_a_api, n):
    total = 60
    _seed(admin_api, total)
    before = dict(MemoryEntry.objects.values_list("key", "access_count"))
    body = agent_a_api.get(f"{BASE}/{U}/visible?order=most_accessed&limit={n}").json()
    keys = [e["key"] for e in body]
    reserved = recall_split(n)
    newest_first = [f"k{i:02d}" for i in range(total - 1, -1, -1)]
    most_accessed = [f"k{i:02d}" for i in range(total)]
    assert keys[:reserved] == newest_first[:reserved]
    assert keys[reserved:] == [k for k in most_accessed if k not in keys[:reserved]][: n - reserved]
    assert len(keys) == len(set(keys)) == n
    # Each returned entry was counted exactly once; the others not at all.
    after = dict(MemoryEntry.objects.values_list("key", "access_count"))
    assert {k for k in after if after[k] != before[k]} == set(keys)
    assert all(after[k] == before[k] + 1 for k in keys)
    assert all(e["accessCount"] == before[e["key"]] + 1 for e in body)


def test_most_recent_and_policy_defaults(admin_api, agent_a, agent_a_api, set_policy):
    _seed(admin_api, 12)
    set_policy(agent_a, max_recall_entries=5)
    keys = [e["key"] for e in agent_a_api.get(f"{BASE}/{U}/visible").json()]
    assert keys == ["k11", "k10", "k09", "k08", "k07"]
    # A larger limit is clamped to the policy's maxRecallEntries.
    assert len(agent_a_api.get(f"{BASE}/{U}/visible?limit=10").json()) == 5
    set_policy(agent_a, recall_order="most_accessed")
    keys = [e["key"] for e in agent_a_api.get(f"{BASE}/{U}/visible").json()]
    assert keys[0] == "k11" and keys[1:] == ["k00", "k01", "k02", "k03"]


def test_last_accessed_is_touched_once_per_granularity(admin_api, agent_a_api, settings):
    settings.MEMORY_ACCESS_GRANULARITY = 3600
    admin_api.put(BASE, {"userId": U, "key": "k", "value": 1, "visibility": "global"}, format="json")
    first = agent_a_api.get(f"{BASE}/{U}/visible").json()[0]["lastAccessedAt"]
    assert first is not None
    second = agent_a_api.get(f"{BASE}/{U}/visible").json()[0]
    assert second["lastAccessedAt"] == first
    assert second["accessCount"] == 0  # most_recent (the default) counts no access
    old = timezone.now() - timedelta(hours=2)
    MemoryEntry.objects.update(last_accessed_at=old)
    third = agent_a_api.get(f"{BASE}/{U}/visible").json()[0]
    assert third["lastAccessedAt"] != first
    # Reads that are not a recall do not touch it, nor updatedAt.
    entry = MemoryEntry.objects.get()
    agent_a_api.get(f"{BASE}/{U}")
    agent_a_api.get(f"{BASE}/{U}/key/k")
    again = MemoryEntry.objects.get()
    assert (again.updated_at, again.last_accessed_at) == (entry.updated_at, entry.last_accessed_at)


def test_only_most_accessed_counts_accesses(admin_api, agent_a_api, settings):
    """EDDI: most_recent has no side effect on accessCount; lastAccessedAt still moves (granularity 0)."""
    settings.MEMORY_ACCESS_GRANULARITY = 0
    admin_api.put(BASE, {"userId": U, "key": "k", "value": 1, "visibility": "global"}, format="json")
    old = timezone.now() - timedelta(hours=2)
    MemoryEntry.objects.update(last_accessed_at=old)
    recent = agent_a_api.get(f"{BASE}/{U}/visible?order=most_recent").json()[0]
    assert recent["accessCount"] == 0
    entry = MemoryEntry.objects.get()
    assert entry.access_count == 0 and entry.last_accessed_at > old
    counted = agent_a_api.get(f"{BASE}/{U}/visible?order=most_accessed").json()[0]
    assert counted["accessCount"] == 1
    assert MemoryEntry.objects.get().access_count == 1
    assert agent_a_api.get(f"{BASE}/{U}/visible?order=most_recent").json()[0]["accessCount"] == 1


def test_visible_and_list_have_bounded_queries(admin_api, agent_a_api, django_assert_max_num_queries):
    _seed(admin_api, 30)
    admin_api.put(
        BASE,
        {
            "userId": U,
            "key": "g",
            "value": 1,
            "visibility": "group",
            "groupIds": ["team"],
            "sourceAgentId": "agent-a",
        },
        format="json",
    )
    agent_a_api.get("/v1/agents/me")  # the key's first use records last_used_at; later ones do not
    # auth (1) + policy (1) + select (1, the agent's groups a subquery) + access update (1), whatever the
    # row count; most_accessed adds its second select
    with django_assert_max_num_queries(4):
        assert len(agent_a_api.get(f"{BASE}/{U}/visible?limit=50").json()) == 31
    with django_assert_max_num_queries(5):
        assert len(agent_a_api.get(f"{BASE}/{U}/visible?order=most_accessed&limit=50").json()) == 31
    with django_assert_max_num_queries(2):
        assert len(agent_a_api.get(f"{BASE}/{U}").json()) == 31
    with django_assert_max_num_queries(2):
        assert len(admin_api.get(f"{BASE}/{U}").json()) == 31


def test_fast_entry_rendering_matches_drf_fields(admin_api, agent_a_api):
    """The output serializer renders entries directly; it must equal DRF's own rendering of its fields."""
    from rest_framework import serializers

    from usermemory.api.serializers import MemoryEntryOutputSerializer

    admin_api.put(
        BASE,
        {
            "userId": U,
            "key": "k",
            "value": {"a": [1, "x"]},
            "visibility": "group",
            "groupIds": ["team"],
            "sourceAgentId": "agent-a",
            "sourceConversationId": "c1",
        },
        format="json",
    )
    agent_a_api.get(f"{BASE}/{U}/visible")  # sets lastAccessedAt
    entry = MemoryEntry.objects.get()
    fast = MemoryEntryOutputSerializer(entry).data
    slow = serializers.ModelSerializer.to_representation(MemoryEntryOutputSerializer(), entry)
    assert dict(fast) == dict(slow)
    # Times in other zones, one of them at UTC's offset (London in winter), are written in UTC all the same.
    entry.valid_from = datetime(2026, 7, 1, 12, 30, 5, 120, tzinfo=ZoneInfo("Europe/Paris"))
    entry.valid_to = datetime(2026, 1, 5, 8, 0, tzinfo=ZoneInfo("Europe/London"))
    fast = MemoryEntryOutputSerializer(entry).data
    assert dict(fast) == dict(
        serializers.ModelSerializer.to_representation(MemoryEntryOutputSerializer(), entry)
    )
    assert (fast["validFrom"], fast["validTo"]) == ("2026-07-01T10:30:05.000120Z", "2026-01-05T08:00:00Z")
    assert fast["lastAccessedAt"] is not None and fast["lastAccessedAt"].endswith("Z")


def test_a_recall_answers_its_entries_as_the_list_does(admin_api, agent_a_api, agent_b):
    """A plain recall renders rows (no model instances); the list renders model instances. Read right after
    the recall (so both see its access marks), each entry's JSON is the same, field for field and in order:
    public ids, timestamps, the JSON values, the conflicted flag the agent may see."""
    writes = [
        {
            "key": "prefs",
            "value": {"a": [1, "x"], "big": 2**70, "t": "line\u2028sep"},
            "visibility": "global",
        },
        {"key": "note", "value": "caf\u00e9 \U0001f600", "confidence": 0.9, "source": "said twice"},
        {"key": "ttl", "value": 0, "ttlSeconds": 3600},
        {"key": "team", "value": [True, 1.5], "visibility": "group", "groupIds": ["team", "ops"]},
        {"key": "color", "value": "red", "visibility": "global", "sourceAgentId": "agent-b"},
        {"key": "color", "value": "blue", "sourceConversationId": "conv-1"},
        {"key": "diet", "value": "vegan"},
    ]
    for write in writes:
        body = {"userId": U, "visibility": "self", "sourceAgentId": "agent-a", **write}
        assert admin_api.put(BASE, body, format="json").status_code in (200, 201)
    for key, value in (("color", "green"), ("diet", "meat")):  # agent-b's own: hidden from agent-a
        hidden = {"userId": U, "key": key, "value": value, "visibility": "self", "sourceAgentId": "agent-b"}
        assert admin_api.put(BASE, hidden, format="json").status_code == 201
    MemoryEntry.objects.filter(key__in=["color", "diet"]).exclude(value="red").update(conflicted=True)
    agent_a_api.get(f"{BASE}/{U}/visible?groupId=team")  # the first use of the key records it

    recalled = agent_a_api.get(f"{BASE}/{U}/visible?groupId=team&order=most_accessed")
    listed = {entry["id"]: entry for entry in agent_a_api.get(f"{BASE}/{U}?groupId=team").json()}

    entries = recalled.json()
    assert len(entries) == 7 and {e["id"] for e in entries} == set(listed)
    for entry in entries:
        assert list(entry.items()) == list(listed[entry["id"]].items())
    colors = sorted((e["value"], e["conflicted"]) for e in entries if e["key"] == "color")
    assert colors == [("blue", True), ("red", False)]  # blue: red differs and is seen; green is hidden
    assert [e["conflicted"] for e in entries if e["key"] == "diet"] == [False]  # only a hidden one differs
    assert b"line\\u2028sep" in recalled.content and str(2**70).encode() in recalled.content
    assert all(e["accessCount"] == 1 and e["lastAccessedAt"].endswith("Z") for e in entries)
