"""No answer reveals what the caller may not see (issue 16): delete and history of hidden entries, history
across visibility changes, capacity refusals, the conflicted flag, and recall's side effects."""

from tests.factories import AgentGroupFactory
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
    grouped = put(agent_a_api, userId=U, key="t", value="v", visibility="group", groupIds=["crew"]).json()[
        "id"
    ]
    for entry_id in (shared, grouped):
        body = assert_envelope(agent_b_api.delete(f"{BASE}/entry/{entry_id}"), 403, "forbidden")
        assert "not owned by agent 'agent-b'" in body["error"]
    assert agent_a_api.get(f"{BASE}/{U}/count").json()["count"] == 2


# --- Capacity refusals: the limit, never the number of entries the agent cannot see -----------------------


def _fill_with_hidden_entries(agent_b_api, put, count):
    for n in range(count):
        assert put(agent_b_api, userId=U, key=f"b{n}", value="private").status_code == 201


def test_a_reject_refusal_to_an_agent_names_the_limit_but_not_the_hidden_count(
    agent_a, agent_a_api, agent_b_api, admin_api, put, set_policy
):
    set_policy(agent_a, max_entries_per_user=5, on_cap_reached="reject")
    _fill_with_hidden_entries(agent_b_api, put, 7)
    assert agent_a_api.get(f"{BASE}/{U}/count").json()["count"] == 0
    body = assert_envelope(put(agent_a_api, userId=U, key="a", value="1"), 409, "capacity")
    assert body["error"] == (
        f"User '{U}' is at the limit of 5 memories (maxEntriesPerUser), counting the entries of every agent, "
        f"including any this agent cannot see; onCapReached is 'reject'."
    )
    assert body["details"] == {"limit": "maxEntriesPerUser", "max": 5}
    # An admin sees every entry, so it is told the count.
    body = assert_envelope(
        put(admin_api, userId=U, key="a", value="1", sourceAgentId="agent-a"), 409, "capacity"
    )
    assert f"User '{U}' has 7 memories" in body["error"]


def test_an_evict_oldest_refusal_to_an_agent_names_no_count(
    agent_a, agent_a_api, agent_b_api, put, set_policy
):
    set_policy(agent_a, max_entries_per_user=5, on_cap_reached="evict_oldest")
    _fill_with_hidden_entries(agent_b_api, put, 7)
    body = assert_envelope(put(agent_a_api, userId=U, key="a", value="1"), 409, "capacity")
    assert "evict_oldest cannot make room" in body["error"]
    assert "including any this agent cannot see" in body["error"]
    assert not any(digit in body["error"].replace("5 memories", "") for digit in "0123456789")
    assert body["details"] == {"limit": "maxEntriesPerUser", "max": 5}


# --- The conflicted flag: true for an agent only when a conflicting entry is visible to it ----------------


def _dream(*agents):
    from dream.services import dream_run_cycle
    from usermemory.services import policy_update

    for agent in agents:
        policy_update(agent_id=agent.id, dream_enabled=True, detect_contradictions=True)
    assert dream_run_cycle().status == "succeeded"


def _flags_at_every_read_door(client, key):
    """Every ``conflicted`` the agent reads on the entries with ``key``, at each read an agent can make."""
    conversation = client.post("/v1/conversations", {"userId": U}, format="json").json()["id"]
    doors = {
        "list": client.get(f"{BASE}/{U}").json(),
        "recent": client.get(f"{BASE}/{U}/visible?order=most_recent").json(),
        "accessed": client.get(f"{BASE}/{U}/visible?order=most_accessed").json(),
        "search": client.get(f"{BASE}/{U}/search?q={key}").json(),
        "category": client.get(f"{BASE}/{U}/category/fact").json(),
        "key": [client.get(f"{BASE}/{U}/key/{key}").json()],
        "context": client.get(f"/v1/conversations/{conversation}/context").json()["userMemories"],
    }
    flags = set()
    for door, entries in doors.items():
        seen = [e["conflicted"] for e in entries if e["key"] == key]
        assert seen, door
        flags.update(seen)
    return flags


def test_a_guess_against_a_hidden_value_is_not_flagged_to_the_guesser(
    agent_a_api, agent_b_api, viewer_api, put
):
    """Agent B cannot learn agent A's private value by writing guesses, running Dream and reading its flag."""
    put(agent_a_api, userId=U, key="pin", value="4711")
    put(agent_b_api, userId=U, key="pin", value="1234")
    _dream(agent_a_api.agent, agent_b_api.agent)
    assert _flags_at_every_read_door(agent_b_api, "pin") == {False}
    assert _flags_at_every_read_door(agent_a_api, "pin") == {False}
    # Staff see the stored flag on both entries.
    assert [e["conflicted"] for e in viewer_api.get(f"{BASE}/{U}").json()] == [True, True]
    recall = viewer_api.get(f"{BASE}/{U}/visible?agentId=agent-b").json()
    assert [e["conflicted"] for e in recall] == [True]


def test_a_conflict_the_agent_can_see_is_flagged_at_every_read_door(agent_a_api, agent_b_api, put):
    put(agent_a_api, userId=U, key="lang", value="English", visibility="global")
    put(agent_b_api, userId=U, key="lang", value="German")
    put(agent_a_api, userId=U, key="pin", value="4711")
    put(agent_b_api, userId=U, key="pin", value="1234")
    _dream(agent_a_api.agent, agent_b_api.agent)
    # B sees the global English and its own German.
    assert _flags_at_every_read_door(agent_b_api, "lang") == {True}
    assert _flags_at_every_read_door(agent_b_api, "pin") == {False}
    own = [e for e in agent_b_api.get(f"{BASE}/{U}").json() if e["key"] == "lang"]
    assert {(e["value"], e["conflicted"]) for e in own} == {("English", True), ("German", True)}
    # A sees only its global English: the German that conflicts with it is B's, and hidden from A.
    assert _flags_at_every_read_door(agent_a_api, "lang") == {False}
