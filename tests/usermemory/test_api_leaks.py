"""No answer reveals what the caller may not see (issue 16): delete and history of hidden entries, history
across visibility changes, capacity refusals, the conflicted flag, and recall's side effects."""

import pytest

from agenttools.mcp_server import tool_call
from apikeys.caller import Caller
from tests.factories import AgentFactory, AgentGroupFactory
from tests.helpers import assert_envelope
from usermemory.models import MemoryEntry, MemoryEvent

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


# --- The cap: nothing an agent is told, or sees go, depends on entries it cannot see (issue 53) -----------


def _fill_with_hidden_entries(agent_b_api, put, count):
    for n in range(count):
        assert put(agent_b_api, userId=U, key=f"b{n}", value="private").status_code == 201


@pytest.mark.parametrize("hidden", [0, 7])
def test_eviction_at_the_cap_is_the_same_whatever_the_agent_cannot_see(
    agent_a, agent_a_api, agent_b_api, put, set_policy, hidden
):
    """Agent a writes 12 entries under a cap of 10. Counting agent b's entries, which agent a cannot see,
    its own writes began to vanish at the fourth (10 - 7): the count of the hidden ones, told by eviction.
    The cap counts agent a's own entries: the same two go, and the same history, with 0 hidden or 7."""
    set_policy(agent_a, max_entries_per_user=10, on_cap_reached="evict_oldest", max_writes_per_turn=20)
    _fill_with_hidden_entries(agent_b_api, put, hidden)

    statuses = [put(agent_a_api, userId=U, key=f"a{n:02}", value=str(n)).status_code for n in range(12)]

    assert statuses == [201] * 12
    seen = agent_a_api.get(f"{BASE}/{U}", {"limit": 50}).json()
    assert sorted(entry["key"] for entry in seen) == [f"a{n:02}" for n in range(2, 12)]
    evicted = MemoryEvent.objects.filter(user_id=U, action="evicted").order_by("id")
    assert [event.key for event in evicted] == ["a00", "a01"]
    assert MemoryEntry.objects.filter(user_id=U, source_agent_id="agent-b").count() == hidden


@pytest.mark.parametrize("hidden", [0, 7])
def test_a_reject_refusal_counts_only_the_writers_entries(
    agent_a, agent_a_api, agent_b_api, admin_api, put, set_policy, hidden
):
    set_policy(agent_a, max_entries_per_user=5, on_cap_reached="reject")
    _fill_with_hidden_entries(agent_b_api, put, hidden)
    for n in range(5):
        assert put(agent_a_api, userId=U, key=f"a{n}", value="1").status_code == 201

    body = assert_envelope(put(agent_a_api, userId=U, key="a5", value="1"), 409, "capacity")

    limit = "the limit (maxEntriesPerUser) is 5; onCapReached is 'reject'."
    told = f"For user '{U}', agent 'agent-a' holds 5; {limit}"
    assert body["error"] == told
    assert body["details"] == {"limit": "maxEntriesPerUser", "max": 5}
    as_agent = put(admin_api, userId=U, key="a5", value="1", sourceAgentId="agent-a")
    assert assert_envelope(as_agent, 409, "capacity")["error"] == told


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
    context = f"/v1/conversations/{conversation}/context"
    doors = {
        "list": client.get(f"{BASE}/{U}").json(),
        "recent": client.get(f"{BASE}/{U}/visible?order=most_recent").json(),
        "accessed": client.get(f"{BASE}/{U}/visible?order=most_accessed").json(),
        "search": client.get(f"{BASE}/{U}/search?q={key}").json(),
        "hybrid search": client.get(f"{BASE}/{U}/search?q={key}&mode=hybrid").json(),
        "recall by relevance": client.get(f"{BASE}/{U}/visible?q={key}").json(),
        "category": client.get(f"{BASE}/{U}/category/fact").json(),
        "key": [client.get(f"{BASE}/{U}/key/{key}").json()],
        "context": client.get(context).json()["userMemories"],
        "context by relevance": client.get(context, {"q": key}).json()["userMemories"],
    }
    caller = Caller.for_key(client.key)
    for tool, arguments in [
        ("get_visible_memories", {}),
        ("search_user_memories", {"query": key}),
        ("get_memory_by_key", {"key": key}),
    ]:
        payload, is_error = tool_call(caller=caller, name=tool, arguments={"userId": U, **arguments})
        assert not is_error, payload
        doors[f"mcp {tool}"] = payload if isinstance(payload, list) else [payload]
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
    # Nor does B's history show Dream flagging its entry; staff see it.
    mine = recall[0]["id"]
    assert [e[0] for e in _history(agent_b_api, mine)] == ["created"]
    assert [e[0] for e in _history(viewer_api, mine)] == ["created", "flagged"]


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


# --- History across visibility changes: an agent sees only the values it could see when they were written --


def _history(client, entry_id):
    response = client.get(f"{BASE}/entry/{entry_id}/history")
    assert response.status_code == 200, response.content
    return [
        (e["action"], e["oldValue"], e["oldValueHidden"], e["newValue"], e["newValueHidden"])
        for e in response.json()
    ]


def test_a_self_entry_reupserted_as_group_shows_the_group_no_past_private_value(
    agent_a_api, make_api_client, viewer_api, put
):
    teammate = make_api_client("agent", AgentFactory(id="agent-c"))
    AgentGroupFactory(id="team-2", members=[agent_a_api.agent, teammate.agent])
    entry_id = put(agent_a_api, userId=U, key="plan", value="private draft").json()["id"]
    put(agent_a_api, userId=U, key="plan", value="still private")
    put(agent_a_api, userId=U, key="plan", value="shared", visibility="group", groupIds=["team-2"])
    put(agent_a_api, userId=U, key="plan", value="shared again", visibility="group", groupIds=["team-2"])
    everything = [
        ("created", None, False, "private draft", False),
        ("updated", "private draft", False, "still private", False),
        ("updated", "still private", False, "shared", False),
        ("updated", "shared", False, "shared again", False),
    ]
    assert _history(agent_a_api, entry_id) == everything
    assert _history(viewer_api, entry_id) == everything
    assert _history(teammate, entry_id) == [
        ("updated", None, True, "shared", False),
        ("updated", "shared", False, "shared again", False),
    ]


def test_an_entry_moved_between_groups_shows_the_new_group_nothing_of_the_old(
    agent_a_api, make_api_client, put
):
    in_g1 = make_api_client("agent", AgentFactory(id="agent-g1"))
    in_g3 = make_api_client("agent", AgentFactory(id="agent-g3"))
    AgentGroupFactory(id="g1", members=[agent_a_api.agent, in_g1.agent])
    AgentGroupFactory(id="g3", members=[agent_a_api.agent, in_g3.agent])
    first = put(agent_a_api, userId=U, key="k", value="g1 only", visibility="group", groupIds=["g1"])
    entry_id = first.json()["id"]
    assert _history(in_g1, entry_id) == [("created", None, False, "g1 only", False)]
    put(agent_a_api, userId=U, key="k", value="for g3", visibility="group", groupIds=["g3"])
    assert _history(in_g3, entry_id) == [("updated", None, True, "for g3", False)]
    assert_envelope(in_g1.get(f"{BASE}/entry/{entry_id}/history"), 404, "not_found")  # it cannot read it now
    # Moved back to both groups: each sees the values of its own group, and never the other's.
    put(agent_a_api, userId=U, key="k", value="for both", visibility="group", groupIds=["g1", "g3"])
    assert _history(in_g1, entry_id) == [
        ("created", None, False, "g1 only", False),
        ("updated", "g1 only", False, None, True),
        ("updated", None, True, "for both", False),
    ]
    assert _history(in_g3, entry_id) == [
        ("updated", None, True, "for g3", False),
        ("updated", "for g3", False, "for both", False),
    ]


def test_dream_and_deletes_record_the_scope_of_the_value(agent_a_api, agent_b_api, put):
    """Events written by Dream (set-based SQL) and by deletes carry the entry's scope too."""
    from usermemory.models import MemoryEvent

    AgentGroupFactory(id="pair", members=[agent_a_api.agent, agent_b_api.agent])
    put(agent_a_api, userId=U, key="k", value="x", visibility="group", groupIds=["pair"])
    mine = put(agent_b_api, userId=U, key="k", value="y").json()["id"]
    _dream(agent_a_api.agent, agent_b_api.agent)
    flagged = MemoryEvent.objects.filter(action="flagged").order_by("entry_id")
    assert [(e.visibility, e.owner, e.group_ids) for e in flagged] == [
        ("group", "agent-a", ["pair"]),
        ("self", "agent-b", []),
    ]
    # A never sees B's entry, nor its events.
    assert_envelope(agent_a_api.get(f"{BASE}/entry/{mine}/history"), 404, "not_found")
    agent_b_api.delete(f"{BASE}/entry/{mine}")
    deleted = MemoryEvent.objects.get(action="deleted")
    assert (deleted.visibility, deleted.owner, deleted.old_visibility) == ("self", "agent-b", "self")
