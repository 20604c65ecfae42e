"""History events, GDPR export and erasure, legacy properties, and the policy API."""

from datetime import timedelta

import pytest
from django.utils import timezone

from apikeys.models import AgentGroup, ApiKey
from tests.factories import AgentFactory
from tests.helpers import assert_envelope, internal_id
from usermemory.history import Actor, Scope
from usermemory.maintenance import Replacement, memory_supersede
from usermemory.models import MemoryEntry, MemoryEvent, Visibility

BASE = "/usermemorystore/memories"
U = "user-h"


def test_every_change_leaves_an_event(agent_a_api, agent_b_api, put):
    entry = put(agent_a_api, userId=U, key="k", value="one").json()
    put(agent_a_api, userId=U, key="k", value="two")
    events = agent_a_api.get(f"{BASE}/entry/{entry['id']}/history").json()
    assert [(e["action"], e["oldValue"], e["newValue"]) for e in events] == [
        ("created", None, "one"),
        ("updated", "one", "two"),
    ]
    assert events[0]["actorType"] == "agent" and events[0]["actorId"] == "agent-a"
    assert events[0]["keyPrefix"] == ""  # issue 33: key prefixes are for staff, an agent's own included
    # Another agent cannot read the history of an entry it cannot see.
    assert_envelope(agent_b_api.get(f"{BASE}/entry/{entry['id']}/history"), 404, "not_found")
    agent_a_api.delete(f"{BASE}/entry/{entry['id']}")
    row = internal_id(entry["id"])
    assert MemoryEvent.objects.filter(entry_id=row, action="deleted", old_value="two").exists()


def test_history_shows_key_prefixes_to_staff_only(agent_a_api, admin_api, viewer_api, make_api_client, put):
    """Issue 33, finding 10: agent C, in group ``team`` with agent A, reads the history of A's group entry and
    of an admin's global one. It sees who changed them (the agent, or the admin role), never a key's prefix;
    viewer and admin keys see every prefix."""
    agent_c = AgentFactory(id="agent-c")
    AgentGroup.objects.get(id="team").members.add(agent_c)
    agent_c_api = make_api_client(ApiKey.Role.AGENT, agent_c)
    shared = put(agent_a_api, userId=U, key="k", value=1, visibility="group", groupIds=["team"]).json()
    put(agent_a_api, userId=U, key="k", value=2, visibility="group", groupIds=["team"])
    public = put(admin_api, userId=U, key="g", value=1, visibility="global").json()
    a_prefix, admin_prefix = agent_a_api.key.prefix, admin_api.key.prefix

    def actors(client, entry):
        events = client.get(f"{BASE}/entry/{entry['id']}/history").json()
        return [(e["actorType"], e["actorId"], e["keyPrefix"]) for e in events]

    for agent in (agent_c_api, agent_a_api):
        assert actors(agent, shared) == [("agent", "agent-a", "")] * 2
        assert actors(agent, public) == [("key", "admin", "")]
    for staff in (viewer_api, admin_api):
        assert actors(staff, shared) == [("agent", "agent-a", a_prefix)] * 2
        assert actors(staff, public) == [("key", f"admin:{admin_prefix}", admin_prefix)]
    assert a_prefix not in agent_c_api.get(f"{BASE}/entry/{shared['id']}/history").content.decode()


def test_history_of_a_deleted_entry_is_readable_by_admin(admin_api, put):
    entry = put(admin_api, userId=U, key="k", value=1, visibility="global").json()
    admin_api.delete(f"{BASE}/entry/{entry['id']}")
    actions = [e["action"] for e in admin_api.get(f"{BASE}/entry/{entry['id']}/history").json()]
    assert actions == ["created", "deleted"]
    assert_envelope(admin_api.get(f"{BASE}/entry/424242/history"), 404, "not_found")


def test_export_and_erasure_cover_history(admin_api, agent_a_api, put):
    put(agent_a_api, userId=U, key="a", value=1)
    put(agent_a_api, userId=U, key="a", value=2)
    put(agent_a_api, userId="someone-else", key="a", value=3)
    export = admin_api.get(f"{BASE}/{U}/export").json()
    assert export["userId"] == U
    assert [m["value"] for m in export["memories"]] == [2]
    assert [h["action"] for h in export["history"]] == ["created", "updated"]

    erased = admin_api.delete(f"{BASE}/{U}").json()
    assert erased["userId"] == U and erased["entriesDeleted"] == 1 and erased["eventsDeleted"] == 2
    assert not MemoryEntry.objects.filter(user_id=U).exists()
    assert list(MemoryEvent.objects.filter(user_id=U).values_list("action", flat=True)) == ["erased"]
    assert MemoryEntry.objects.filter(user_id="someone-else").count() == 1
    assert admin_api.get(f"{BASE}/{U}").json() == []


def test_export_has_a_versioned_format_of_its_own(admin_api, agent_a_api, put):
    """The legal export names its format and its own fields, whatever the API's serializers call them."""
    observed = "2026-01-02T03:04:05+00:00"
    put(
        agent_a_api,
        userId=U,
        key="a",
        value="one",
        visibility="group",
        groupIds=["team"],
        observedAt=observed,
    )
    response = admin_api.get(f"{BASE}/{U}/export")
    assert "X-Read-From" not in response  # no replica configured: nothing routes, nothing is said
    export = response.json()
    assert export["format"] == 4
    assert export["replicaReplayedAt"] is None  # one node: read from the primary
    (memory,) = export["memories"]
    assert set(memory) == {
        "id", "key", "value", "category", "visibility", "ownerAgentId", "groupIds", "sourceConversationId",
        "conflicted", "accessCount", "createdAt", "updatedAt", "observedAt", "lastAccessedAt", "confidence",
        "source",
    }  # fmt: skip
    assert (memory["ownerAgentId"], memory["groupIds"], memory["value"]) == ("agent-a", ["team"], "one")
    (event,) = export["history"]
    assert set(event) == {
        "id", "entryId", "key", "action", "actorType", "actorId", "oldValue", "newValue", "ownerAgentId",
        "oldVisibility", "oldGroupIds", "visibility", "groupIds", "at", "observedAt",
    }  # fmt: skip
    assert (event["action"], event["entryId"], event["visibility"]) == ("created", memory["id"], "group")
    assert memory["observedAt"] == event["observedAt"] == observed  # the time order, as the write gave it


def test_legacy_properties(agent_a_api, agent_b_api, admin_api, put):
    assert agent_a_api.get(f"/propertiesstore/properties/{U}").status_code == 204
    put(agent_a_api, userId=U, key="private", value="hidden")  # a self entry is not a property
    merged = agent_a_api.post(
        f"/propertiesstore/properties/{U}",
        {"name": "Alice", "age": 30, "_id": "x", "userId": U},
        format="json",
    )
    assert merged.status_code == 200
    assert merged.json() == {"age": 30, "name": "Alice"}
    entry = MemoryEntry.objects.get(user_id=U, key="name")
    assert (entry.visibility, entry.category, entry.source_agent_id) == ("global", "property", "agent-a")
    # An update keeps the category it has.
    MemoryEntry.objects.filter(id=entry.id).update(category="fact")
    agent_b_api.post(f"/propertiesstore/properties/{U}", {"name": "Alicia"}, format="json")
    entry.refresh_from_db()
    assert (entry.value, entry.category, entry.source_agent_id) == ("Alicia", "fact", "agent-a")
    # Agent B owns none of them, so its delete removes nothing; admin's removes every global entry.
    assert agent_b_api.delete(f"/propertiesstore/properties/{U}").status_code == 204
    assert agent_b_api.get(f"/propertiesstore/properties/{U}").json() == {"age": 30, "name": "Alicia"}
    assert admin_api.delete(f"/propertiesstore/properties/{U}").status_code == 204
    assert admin_api.get(f"/propertiesstore/properties/{U}").status_code == 204
    assert MemoryEntry.objects.filter(user_id=U, key="private").exists()
    assert_envelope(
        agent_a_api.post(f"/propertiesstore/properties/{U}", [1], format="json"), 400, "bad_request"
    )


def test_legacy_properties_hide_expired_and_superseded_entries(
    agent_a_api, agent_b_api, viewer_api, put, monkeypatch
):
    """Issue 44, finding 9: the legacy map shows the global entries every other read shows, valid now: not
    one past its TTL, nor one a Dream summary superseded (the summary itself is current, so it shows)."""
    with monkeypatch.context() as clock:
        an_hour_ago = timezone.now() - timedelta(hours=1)
        clock.setattr(timezone, "now", lambda: an_hour_ago)
        put(agent_a_api, userId=U, key="mood", value="tired", visibility="global", ttlSeconds=60)
    city = put(agent_b_api, userId=U, key="city", value="Berlin", visibility="global").json()
    put(agent_b_api, userId=U, key="name", value="Ada", visibility="global")
    source = MemoryEntry.objects.get(id=internal_id(city["id"]))
    superseded = memory_supersede(
        user_id=U,
        scope=Scope(Visibility.GLOBAL, None, []),
        category="fact",
        replacements=[Replacement("home", "home (dream)", "Lives in Berlin", [source.id], {"run": 1})],
        sources_read={source.id: source.updated_at},
        actor=Actor(MemoryEvent.ActorType.DREAM, "run:1"),
        record_agents=False,
    )
    assert superseded == 1
    for client in (agent_a_api, agent_b_api, viewer_api):
        listed = {e["key"] for e in client.get(f"{BASE}/{U}").json()}
        assert listed == {"home", "name"}
        legacy = client.get(f"/propertiesstore/properties/{U}")
        assert legacy.json() == {"home": "Lives in Berlin", "name": "Ada"}, legacy.content
    # Asked for everything, the list still has them: they are hidden, not gone.
    everything = viewer_api.get(f"{BASE}/{U}", {"includeSuperseded": "true"}).json()
    assert {e["key"] for e in everything} == {"city", "home", "mood", "name"}


DEFAULT_POLICY = {
    "maxEntriesPerUser": 500,
    "maxRecallEntries": 50,
    "recallOrder": "most_recent",
    "recallTopK": 5,
    "onCapReached": "evict_oldest",
    "guardrails": {
        "maxKeyLength": 100,
        "maxValueLength": 1000,
        "maxWritesPerTurn": 10,
        "allowedCategories": ["preference", "fact", "context"],
    },
    "dreamConfig": {
        "enabled": False,
        "pruneStaleAfterDays": 90,
        "pruneExpiredAfterDays": 30,
        "detectContradictions": True,
        "summarizeInteractions": False,
        "maxCostPerRun": 0.5,
        "crossAgentMaintenance": False,
        "summarizeMinEntries": 10,
        "summarizeTargetEntries": 3,
        "summarizeGroupBy": "category",
        "preserveAgentProvenance": True,
        "summarizeRequiresApproval": False,
        "semanticContradictionThreshold": 0.96,
        "confirmContradictionsWithLlm": False,
        "maxLlmCallsPerRun": 100,
        "maxLlmCallsPerUser": 10,
    },
    "extractionConfig": {
        "extractFromConversations": False,
        "maxExtractionCostPerRun": 0.5,
        "visibility": "self",
    },
    "toolCallRetentionDays": 30,
    "llmBudget": None,
}


def test_policy_read(admin_api, agent_a):
    body = admin_api.get("/v1/agents/agent-a").json()
    assert body["id"] == "agent-a"
    assert body["memoryPolicy"] == DEFAULT_POLICY


def test_policy_patch(admin_api, agent_a):
    patched = admin_api.patch(
        "/v1/agents/agent-a",
        {
            "displayName": "A!",
            "memoryPolicy": {
                "maxRecallEntries": 7,
                "guardrails": {"maxKeyLength": 20},
                "dreamConfig": {"enabled": True},
                "extractionConfig": {"extractFromConversations": True, "visibility": "group"},
            },
        },
        format="json",
    ).json()
    assert patched["displayName"] == "A!"
    assert patched["memoryPolicy"]["maxRecallEntries"] == 7
    assert patched["memoryPolicy"]["guardrails"]["maxKeyLength"] == 20
    assert patched["memoryPolicy"]["guardrails"]["maxValueLength"] == 1000
    assert patched["memoryPolicy"]["dreamConfig"]["enabled"] is True
    extraction = patched["memoryPolicy"]["extractionConfig"]
    assert extraction == {
        "extractFromConversations": True,
        "maxExtractionCostPerRun": 0.5,
        "visibility": "group",
    }
    assert admin_api.get("/v1/agents/agent-a").json()["memoryPolicy"]["maxRecallEntries"] == 7


@pytest.mark.parametrize(
    ("agent", "policy", "status", "code"),
    [
        ("agent-a", {"recallOrder": "random"}, 400, "bad_request"),
        ("agent-a", {"maxRecallEntries": 0}, 400, "bad_request"),
        ("ghost", {"maxRecallEntries": 3}, 404, "not_found"),
    ],
)
def test_policy_patch_refused(admin_api, agent_a, agent, policy, status, code):
    response = admin_api.patch(f"/v1/agents/{agent}", {"memoryPolicy": policy}, format="json")
    assert_envelope(response, status, code)
    assert admin_api.get("/v1/agents/agent-a").json()["memoryPolicy"] == DEFAULT_POLICY
