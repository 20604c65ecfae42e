"""No answer reveals what the caller may not see (issue 16): delete and history of hidden entries, history
across visibility changes, capacity refusals, the conflicted flag, and recall's side effects."""

from tests.factories import AgentFactory, AgentGroupFactory
from tests.helpers import assert_envelope

BASE = "/usermemorystore/memories"
U = "user-leak"


# --- Delete and history: a hidden entry is a 404, the same as an id that does not exist ------------------


def test_deleting_a_hidden_entry_is_the_same_404_as_an_unknown_id(agent_a_api, agent_b_api, put):
    entry_id = put(agent_a_api, userId=U, key="secret", value="private").json()["id"]
    hidden = agent_b_api.delete(f"{BASE}/entry/{entry_id}")
    hidden_history = agent_b_api.get(f"{BASE}/entry/{entry_id}/history")
    assert_envelope(hidden, 404, "not_found")
    assert_envelope(hidden_history, 404, "not_found")
    assert agent_a_api.get(f"{BASE}/{U}/key/secret").status_code == 200  # nothing was deleted

    assert agent_a_api.delete(f"{BASE}/entry/{entry_id}").status_code == 204
    gone = agent_b_api.delete(f"{BASE}/entry/{entry_id}")
    gone_history = agent_b_api.get(f"{BASE}/entry/{entry_id}/history")
    assert gone.content == hidden.content
    assert gone_history.content == hidden_history.content
    assert hidden.content == hidden_history.content


def test_an_entry_the_caller_reads_but_does_not_own_is_a_403(agent_a_api, agent_b_api, put):
    AgentGroupFactory(id="crew", members=[agent_a_api.agent, agent_b_api.agent])
    shared = put(agent_a_api, userId=U, key="g", value="v", visibility="global").json()["id"]
    grouped = put(agent_a_api, userId=U, key="t", value="v", visibility="group", groupIds=["crew"]).json()["id"]
    for entry_id in (shared, grouped):
        body = assert_envelope(agent_b_api.delete(f"{BASE}/entry/{entry_id}"), 403, "forbidden")
        assert "not owned by agent 'agent-b'" in body["error"]
    assert agent_a_api.get(f"{BASE}/{U}/count").json()["count"] == 2
