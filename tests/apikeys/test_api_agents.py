import pytest

from apikeys.models import Agent, AgentGroup
from tests.helpers import assert_envelope


def test_me_returns_the_calling_agent(agent_a_api):
    body = agent_a_api.get("/v1/agents/me").json()
    assert body["id"] == "agent-a"
    assert body["displayName"] == "Agent A"
    assert body["groups"] == ["team"]
    assert body["status"] == "active"
    assert body["lastActiveAt"] is not None


@pytest.mark.parametrize("client_name", ["agent_a_api", "viewer_api"])
def test_directory_changes_and_groups_are_admin_only(request, client_name):
    client = request.getfixturevalue(client_name)
    assert_envelope(client.post("/v1/agents", {"id": "x"}, format="json"), 403, "forbidden")
    assert_envelope(client.get("/v1/groups"), 403, "forbidden")


def test_anonymous_directory_is_401(anon_api, db):
    assert_envelope(anon_api.get("/v1/agents"), 401, "unauthorized")


def test_admin_creates_lists_and_patches_agents(admin_api):
    created = admin_api.post(
        "/v1/agents",
        {"id": "doc-expert", "displayName": "Doc", "capabilities": ["pdf"], "groups": ["swarm"]},
        format="json",
    )
    assert created.status_code == 201, created.content
    assert created.json()["groups"] == ["swarm"]
    assert AgentGroup.objects.get(id="swarm").members.filter(id="doc-expert").exists()

    listed = admin_api.get("/v1/agents?status=active").json()
    assert [a["id"] for a in listed["results"]] == ["doc-expert"]

    patched = admin_api.patch("/v1/agents/doc-expert", {"status": "idle", "model": "m2"}, format="json")
    assert patched.json()["status"] == "idle"
    assert Agent.objects.get(id="doc-expert").model == "m2"
    assert admin_api.get("/v1/agents?status=active").json()["results"] == []


def test_duplicate_agent_is_409_and_bad_ids_are_400(admin_api):
    assert admin_api.post("/v1/agents", {"id": "bot"}, format="json").status_code == 201
    assert_envelope(admin_api.post("/v1/agents", {"id": "bot"}, format="json"), 409, "conflict")
    assert_envelope(admin_api.post("/v1/agents", {"id": "Not Valid!"}, format="json"), 400, "bad_request")
    assert_envelope(admin_api.post("/v1/agents", {"id": "me"}, format="json"), 400, "bad_request")
    assert_envelope(admin_api.post("/v1/agents", {"capabilities": "x"}, format="json"), 400, "bad_request")
    assert_envelope(
        admin_api.patch("/v1/agents/bot", {"status": "asleep"}, format="json"), 400, "bad_request"
    )
    assert_envelope(admin_api.get("/v1/agents/nobody"), 404, "not_found")


def test_group_members(admin_api, agent_a, agent_b):
    assert (
        admin_api.post("/v1/groups", {"id": "pair", "members": ["agent-a"]}, format="json").status_code == 201
    )
    body = admin_api.post("/v1/groups/pair/members", {"agentIds": ["agent-b"]}, format="json").json()
    assert body["members"] == ["agent-a", "agent-b"]
    assert_envelope(
        admin_api.post("/v1/groups/pair/members", {"agentIds": ["ghost"]}, format="json"), 400, "bad_request"
    )
    assert admin_api.delete("/v1/groups/pair/members/agent-a").status_code == 204
    assert admin_api.get("/v1/groups/pair/members").json()["members"] == ["agent-b"]
    assert_envelope(admin_api.delete("/v1/groups/pair/members/agent-a"), 404, "not_found")
    assert_envelope(admin_api.get("/v1/groups/none/members"), 404, "not_found")


def test_directory_list_has_bounded_queries(admin_api, django_assert_max_num_queries):
    for n in range(15):
        admin_api.post("/v1/agents", {"id": f"bot-{n}", "groups": ["g1", "g2"]}, format="json")
    with django_assert_max_num_queries(5):
        body = admin_api.get("/v1/agents").json()
    assert body["count"] == 15
