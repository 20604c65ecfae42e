"""The agent directory as agents see it (seed 001's list_agents and get_agent_capabilities): any key lists it,
only admin keys see more than the public fields; status and lastActiveAt follow use."""

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from apikeys.models import Agent
from tests.factories import AgentFactory
from tests.helpers import assert_envelope

PUBLIC = {"id", "displayName", "capabilities", "model", "status", "lastActiveAt"}


@pytest.fixture
def directory(agent_a, agent_b):
    AgentFactory(id="planner", capabilities=["planning", "search"], model="gpt-x")
    AgentFactory(id="offline", capabilities=["search"], status=Agent.Status.UNAVAILABLE)


def ids(response):
    assert response.status_code == 200, response.content
    return [agent["id"] for agent in response.json()["results"]]


def test_an_agent_lists_the_directory_with_public_fields_only(directory, agent_b_api, viewer_api):
    for client in (agent_b_api, viewer_api):
        body = client.get("/v1/agents").json()
        assert [a["id"] for a in body["results"]] == ["agent-a", "agent-b", "offline", "planner"]
        assert all(set(agent) == PUBLIC for agent in body["results"])  # no groups, keys or policy
        planner = body["results"][-1]
        assert planner["capabilities"] == ["planning", "search"] and planner["model"] == "gpt-x"


def test_the_directory_filters_by_status_and_capability(directory, agent_a_api):
    assert ids(agent_a_api.get("/v1/agents", {"capability": "search"})) == ["offline", "planner"]
    assert ids(agent_a_api.get("/v1/agents", {"capability": "search", "status": "active"})) == ["planner"]
    assert ids(agent_a_api.get("/v1/agents", {"status": "unavailable"})) == ["offline"]
    assert_envelope(agent_a_api.get("/v1/agents", {"status": "asleep"}), 400, "bad_request")


def test_only_admins_see_more_and_add_agents(directory, admin_api, agent_a_api):
    body = admin_api.get("/v1/agents").json()
    assert {"groups", "createdAt"} <= set(body["results"][0])
    assert_envelope(agent_a_api.post("/v1/agents", {"id": "x"}, format="json"), 403, "forbidden")
    assert not Agent.objects.filter(id="x").exists()


def test_the_directory_lists_with_a_fixed_number_of_queries(
    directory, agent_a_api, django_assert_num_queries
):
    agent_a_api.get("/v1/agents")  # the key is looked up and touched once
    with django_assert_num_queries(3):  # the key, the count, the page
        assert len(ids(agent_a_api.get("/v1/agents"))) == 4


def test_status_and_last_active_follow_use(agent_a, agent_a_api, agent_b_api, settings):
    long_ago = timezone.now() - timedelta(hours=3)
    Agent.objects.filter(id="agent-a").update(last_active_at=long_ago)
    settings.AGENT_IDLE_AFTER = 3600

    call_command("dream")  # a cycle marks agents unused for AGENT_IDLE_AFTER idle

    seen = {a["id"]: a for a in agent_b_api.get("/v1/agents").json()["results"]}
    assert seen["agent-a"]["status"] == "idle"
    assert seen["agent-b"]["status"] == "active"  # it is using its key right now
    agent_a_api.get("/v1/agents/me")  # agent-a's next request makes it active, and records when
    seen = {a["id"]: a for a in agent_b_api.get("/v1/agents").json()["results"]}
    assert seen["agent-a"]["status"] == "active"
    assert timezone.now() - timedelta(minutes=1) < Agent.objects.get(id="agent-a").last_active_at


def test_use_does_not_make_an_unavailable_agent_active(agent_a, agent_a_api, admin_api):
    admin_api.patch("/v1/agents/agent-a", {"status": "unavailable"}, format="json")
    Agent.objects.filter(id="agent-a").update(last_active_at=timezone.now() - timedelta(hours=3))

    agent_a_api.get("/v1/agents/me")

    agent = Agent.objects.get(id="agent-a")
    assert agent.status == "unavailable" and agent.last_active_at > timezone.now() - timedelta(minutes=1)
