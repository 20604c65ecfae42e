"""EDDI's integration flow through REST with real keys."""

from tests.helpers import assert_envelope

BASE = "/usermemorystore/memories"


def put(client, **body):
    return client.put(BASE, body, format="json")


def test_eddi_integration_flow(agent_a_api, admin_api):
    created = put(agent_a_api, userId="user-1", key="favorite_color", value="blue", category="preference")
    assert created.status_code == 201, created.content
    entry = created.json()
    assert entry["sourceAgentId"] == "agent-a" and entry["visibility"] == "self"
    assert entry["id"] and entry["accessCount"] == 0 and entry["conflicted"] is False

    updated = put(agent_a_api, userId="user-1", key="favorite_color", value="green", category="preference")
    assert updated.status_code == 200
    assert updated.json()["id"] == entry["id"]
    assert updated.json()["createdAt"] == entry["createdAt"]
    put(agent_a_api, userId="user-1", key="language", value="German", category="fact", visibility="global")

    listed = agent_a_api.get(f"{BASE}/user-1").json()
    assert [e["key"] for e in listed] == ["language", "favorite_color"]
    assert agent_a_api.get(f"{BASE}/user-1/key/favorite_color").json()["value"] == "green"
    assert [e["key"] for e in agent_a_api.get(f"{BASE}/user-1/category/fact").json()] == ["language"]
    assert [e["key"] for e in agent_a_api.get(f"{BASE}/user-1/search?q=GERM").json()] == ["language"]
    assert agent_a_api.get(f"{BASE}/user-1/count").json() == {"userId": "user-1", "count": 2}
    visible = agent_a_api.get(f"{BASE}/user-1/visible?agentId=agent-a&order=most_recent&limit=20").json()
    assert {e["key"] for e in visible} == {"language", "favorite_color"}
    assert all(e["accessCount"] == 0 for e in visible)  # most_recent counts no access (EDDI)

    assert agent_a_api.delete(f"{BASE}/entry/{entry['id']}").status_code == 204
    assert_envelope(agent_a_api.get(f"{BASE}/user-1/key/favorite_color"), 404, "not_found")
    body = agent_a_api.get(f"{BASE}/user-1/key/favorite_color").json()
    assert body["error"] == "No memory with key 'favorite_color' found for user: user-1"

    erased = admin_api.delete(f"{BASE}/user-1")
    assert erased.status_code == 200
    assert erased.json()["entriesDeleted"] == 1
    assert agent_a_api.get(f"{BASE}/user-1").json() == []


def test_an_upsert_writes_the_category_it_is_given_or_fact(agent_a_api):
    put(agent_a_api, userId="user-c", key="tone", value="formal", category="preference")
    assert put(agent_a_api, userId="user-c", key="tone", value="casual").json()["category"] == "fact"
    assert agent_a_api.get(f"{BASE}/user-c/key/tone").json()["category"] == "fact"
