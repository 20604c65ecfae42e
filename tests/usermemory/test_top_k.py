"""What an agent gets back by default (issue 55): the best ``recallTopK`` rows it may read (a policy setting,
default 5), each with its score, and no score cut unless the caller gives ``minScore``. The same rows at
every door that fills an agent's context: ``/visible?q=``, a conversation's ``/context?q=`` and the
``searchMemory`` LLM tool (MCP: ``tests/agenttools/test_mcp_ranked.py``)."""

import re

import pytest

from tests.conversations.utils import create
from tests.helpers import assert_envelope
from tests.usermemory.ranked import BASE

U = "user-top-k"
VISIBLE = f"{BASE}/{U}/visible"
POLICY = "/v1/agents/agent-a"

FACTS = {
    "home_town": "Hamburg",
    "native_language": "speaks German and some Spanish",
    "pet": "a grey cat called Moritz",
    "job": "works as a nurse at night",
    "coffee": "drinks oat milk flat whites",
    "partner_name": "Tom",
    "car": "a red Volvo estate",
    "allergy": "allergic to peanuts",
}
ANSWERED = "which language does the user speak"
NEVER_SAID = "what is the user's favourite football team"


@pytest.fixture
def facts(agent_a_api, put, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        for key, value in FACTS.items():
            body = {"userId": U, "key": key, "value": value, "visibility": "global"}
            assert put(agent_a_api, **body).status_code == 201


def visible(client, **params):
    response = client.get(VISIBLE, params)
    assert response.status_code == 200, response.content
    return response.json()


def context(client, conversation, **params):
    response = client.get(f"/v1/conversations/{conversation}/context", params)
    assert response.status_code == 200, response.content
    return response.json()["userMemories"]


def search_tool(client, **arguments):
    body = {"userId": U, "arguments": arguments}
    response = client.post("/v1/tools/searchMemory/invoke", body, format="json")
    assert response.status_code == 200, response.content
    return response.json()["result"]


def tool_keys(result: str) -> list[str]:
    """The keys the searchMemory tool lists, in its order (EDDI's ``  • key = value [...]`` lines)."""
    return re.findall(r"^\s*• (\S+) = ", result, re.MULTILINE)


def keys(entries):
    return [e["key"] for e in entries]


def test_the_default_is_the_best_five_with_no_cut(facts, agent_a_api):
    found = visible(agent_a_api, q=ANSWERED)
    assert len(found) == 5 and keys(found)[0] == "native_language"
    scores = [e["score"] for e in found]
    assert scores == sorted(scores, reverse=True) and all(0 <= s <= 1 for s in scores)
    # a question about something never said still gets the best five: the reader weighs their scores
    never = visible(agent_a_api, q=NEVER_SAID)
    assert len(never) == 5 and all(e["score"] < found[0]["score"] for e in never)


def test_min_score_still_cuts(facts, agent_a_api):
    every = visible(agent_a_api, q=ANSWERED)
    top = every[0]["score"]
    assert keys(visible(agent_a_api, q=ANSWERED, minScore=top)) == ["native_language"]
    assert visible(agent_a_api, q=NEVER_SAID, minScore=0.99) == []
    assert_envelope(agent_a_api.get(VISIBLE, {"q": "x", "minScore": 2}), 400, "bad_request")


def test_recall_top_k_is_the_agents_policy_and_a_limit_overrides_it(facts, agent_a_api, admin_api):
    changed = admin_api.patch(POLICY, {"memoryPolicy": {"recallTopK": 3}}, format="json")
    assert changed.status_code == 200, changed.content
    assert changed.json()["memoryPolicy"]["recallTopK"] == 3
    assert len(visible(agent_a_api, q=ANSWERED)) == 3
    assert len(visible(agent_a_api, q=ANSWERED, limit=7)) == 7
    # at most maxRecallEntries, whichever asks more
    admin_api.patch(POLICY, {"memoryPolicy": {"maxRecallEntries": 2}}, format="json")
    assert len(visible(agent_a_api, q=ANSWERED)) == 2
    assert len(visible(agent_a_api, q=ANSWERED, limit=7)) == 2
    # without q, the recall order and maxRecallEntries, as before
    assert len(visible(agent_a_api)) == 2
    for bad in (0, 1001, "three"):
        refused = admin_api.patch(POLICY, {"memoryPolicy": {"recallTopK": bad}}, format="json")
        assert_envelope(refused, 400, "bad_request")


def test_the_same_rows_at_every_door(facts, agent_a_api, admin_api):
    admin_api.patch(POLICY, {"memoryPolicy": {"recallTopK": 4}}, format="json")
    conversation = create(agent_a_api, U)
    for question in (ANSWERED, NEVER_SAID, "is the user married?"):
        at_visible = keys(visible(agent_a_api, q=question))
        assert len(at_visible) == 4
        assert keys(context(agent_a_api, conversation, q=question)) == at_visible
        assert tool_keys(search_tool(agent_a_api, query=question)) == at_visible
        cut = 0.99
        assert visible(agent_a_api, q=question, minScore=cut) == []
        assert context(agent_a_api, conversation, q=question, minScore=cut) == []
        assert search_tool(agent_a_api, query=question, minScore=cut).startswith("No memories found")
