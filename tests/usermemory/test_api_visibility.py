"""The visibility matrix and the agent-key rules, through REST with a real key per role."""

import pytest

from tests.factories import AgentGroupFactory
from tests.helpers import assert_envelope, internal_id
from usermemory.models import MemoryEntry

BASE = "/usermemorystore/memories"
U = "user-42"


def reads(client, user=U, key="secret", category="fact", q="secret"):
    """Every read an agent can make, as (name, keys seen)."""
    return {
        "list": {e["key"] for e in client.get(f"{BASE}/{user}").json()},
        "search": {e["key"] for e in client.get(f"{BASE}/{user}/search?q={q}").json()},
        "category": {e["key"] for e in client.get(f"{BASE}/{user}/category/{category}").json()},
        "key": client.get(f"{BASE}/{user}/key/{key}").status_code,
        "count": client.get(f"{BASE}/{user}/count").json()["count"],
        "visible": {e["key"] for e in client.get(f"{BASE}/{user}/visible").json()},
    }


def test_self_entry_is_invisible_to_another_agent_in_every_read(agent_a_api, agent_b_api, put):
    assert put(agent_a_api, userId=U, key="secret", value="secret value", category="fact").status_code == 201
    seen_by_a = reads(agent_a_api)
    assert seen_by_a == {
        "list": {"secret"},
        "search": {"secret"},
        "category": {"secret"},
        "key": 200,
        "count": 1,
        "visible": {"secret"},
    }
    seen_by_b = reads(agent_b_api)
    assert seen_by_b == {
        "list": set(),
        "search": set(),
        "category": set(),
        "key": 404,
        "count": 0,
        "visible": set(),
    }


def test_viewer_and_admin_read_everything_but_name_the_agent_on_visible(
    agent_a_api, agent_b, viewer_api, admin_api, put
):
    put(agent_a_api, userId=U, key="secret", value="secret value", category="fact")
    for client in (viewer_api, admin_api):
        assert {e["key"] for e in client.get(f"{BASE}/{U}").json()} == {"secret"}
        assert_envelope(client.get(f"{BASE}/{U}/visible"), 400, "bad_request")
        assert [e["key"] for e in client.get(f"{BASE}/{U}/visible?agentId=agent-a").json()] == ["secret"]
        assert client.get(f"{BASE}/{U}/visible?agentId=agent-b").json() == []


def test_group_entry_is_seen_by_members_of_that_group_only(
    agent_a, agent_a_api, agent_b_api, make_api_client, put
):
    from tests.factories import AgentFactory

    teammate = AgentFactory(id="agent-c")
    AgentGroupFactory(id="team", members=[agent_a, teammate])
    c_api = make_api_client("agent", teammate)
    created = put(
        agent_a_api, userId=U, key="plan", value="ship friday", visibility="group", groupIds=["team"]
    )
    assert created.status_code == 201, created.content
    assert created.json()["groupIds"] == ["team"]
    assert {e["key"] for e in c_api.get(f"{BASE}/{U}").json()} == {"plan"}
    assert c_api.get(f"{BASE}/{U}/key/plan").status_code == 200
    assert {e["key"] for e in c_api.get(f"{BASE}/{U}/visible").json()} == {"plan"}
    assert agent_b_api.get(f"{BASE}/{U}").json() == []
    assert agent_b_api.get(f"{BASE}/{U}/count").json()["count"] == 0
    # A group context that does not include the entry's group hides it even from a member.
    AgentGroupFactory(id="other", members=[teammate])
    assert c_api.get(f"{BASE}/{U}/visible?groupId=other").json() == []


def test_group_write_without_group_ids_defaults_to_the_agents_groups(agent_a_api, put):
    created = put(agent_a_api, userId=U, key="plan", value="x", visibility="group")
    assert created.json()["groupIds"] == ["team"]


def test_global_entry_is_seen_by_all_and_keeps_its_owner(agent_a_api, agent_b_api, put):
    first = put(agent_a_api, userId=U, key="language", value="English", visibility="global").json()
    assert {e["key"] for e in agent_b_api.get(f"{BASE}/{U}").json()} == {"language"}
    again = put(agent_b_api, userId=U, key="language", value="German", visibility="global")
    assert again.status_code == 200
    body = again.json()
    assert body["id"] == first["id"]
    assert body["sourceAgentId"] == "agent-a"
    assert body["value"] == "German"
    assert MemoryEntry.objects.get().source_agent_id == "agent-a"
    # Only its owner may delete it.
    assert_envelope(agent_b_api.delete(f"{BASE}/entry/{first['id']}"), 403, "forbidden")


def test_b_naming_a_is_forbidden(agent_a_api, agent_b_api, put):
    assert_envelope(agent_b_api.get(f"{BASE}/{U}/visible?agentId=agent-a"), 403, "forbidden")
    assert_envelope(put(agent_b_api, userId=U, key="k", value="v", sourceAgentId="agent-a"), 403, "forbidden")
    assert MemoryEntry.objects.count() == 0
    # Naming itself is fine.
    assert put(agent_b_api, userId=U, key="k", value="v", sourceAgentId="agent-b").status_code == 201


def test_non_member_group_is_forbidden(agent_a_api, agent_b_api, put):
    body = assert_envelope(
        put(agent_b_api, userId=U, key="k", value="v", visibility="group", groupIds=["team"]),
        403,
        "forbidden",
    )
    assert "team" in body["error"]
    for path in ("", "/search?q=x", "/count", "/visible", "/category/fact", "/key/k"):
        sep = "&" if "?" in path else "?"
        assert_envelope(agent_b_api.get(f"{BASE}/{U}{path}{sep}groupId=team"), 403, "forbidden")
    assert MemoryEntry.objects.count() == 0


def test_b_deleting_a_s_private_entry_is_not_found(agent_a_api, agent_b_api, put):
    entry = put(agent_a_api, userId=U, key="k", value="v").json()
    assert_envelope(agent_b_api.delete(f"{BASE}/entry/{entry['id']}"), 404, "not_found")
    assert MemoryEntry.objects.filter(id=internal_id(entry["id"])).exists()
    assert_envelope(agent_b_api.delete(f"{BASE}/entry/999999"), 404, "not_found")


def test_viewer_cannot_write(viewer_api, put, db):
    assert_envelope(put(viewer_api, userId=U, key="k", value="v", visibility="global"), 403, "forbidden")
    assert_envelope(viewer_api.put(f"{BASE}/batch", [], format="json"), 403, "forbidden")
    assert_envelope(
        viewer_api.post(f"/propertiesstore/properties/{U}", {"a": 1}, format="json"), 403, "forbidden"
    )
    assert MemoryEntry.objects.count() == 0


@pytest.mark.parametrize("client_name", ["agent_a_api", "viewer_api"])
def test_non_admin_cannot_erase_or_export(request, client_name, admin_api, put):
    put(admin_api, userId=U, key="k", value="v", visibility="global")
    client = request.getfixturevalue(client_name)
    assert_envelope(client.delete(f"{BASE}/{U}"), 403, "forbidden")
    assert_envelope(client.get(f"{BASE}/{U}/export"), 403, "forbidden")
    assert MemoryEntry.objects.count() == 1


def test_anonymous_gets_401(anon_api, db):
    assert_envelope(anon_api.get(f"{BASE}/{U}"), 401, "unauthorized")
    assert_envelope(
        anon_api.put(BASE, {"userId": U, "key": "k", "value": 1}, format="json"), 401, "unauthorized"
    )


def test_admin_writes_name_the_owner(admin_api, agent_a, put):
    assert_envelope(put(admin_api, userId=U, key="k", value="v", visibility="self"), 400, "bad_request")
    owned = put(admin_api, userId=U, key="k", value="v", visibility="self", sourceAgentId="agent-a")
    assert owned.status_code == 201 and owned.json()["sourceAgentId"] == "agent-a"
    unowned = put(admin_api, userId=U, key="g", value="v", visibility="global")
    assert unowned.status_code == 201 and unowned.json()["sourceAgentId"] is None
    assert_envelope(put(admin_api, userId=U, key="k", value="v", sourceAgentId="ghost"), 400, "bad_request")
