"""The upsert rules through usermemory's services, apart from any door: the cap (evicting the writer's oldest
entry, or refusing), the turn limit (maxWritesPerTurn) and groups (membership, the default groups of a
``group`` write, a rewrite's new groups). The REST tests check the same rules as a door answers them."""

import pytest

from apikeys.caller import Caller
from apikeys.models import Agent, ApiKey
from memoryplatform.errors import BadRequest, CapacityReached, Forbidden, RateLimited
from tests.factories import AgentFactory, AgentGroupFactory
from usermemory.models import MemoryEntry, MemoryEntryGroup, MemoryEvent, OnCapReached, Visibility
from usermemory.services import MemoryWrite, memory_upsert, memory_upsert_batch

pytestmark = pytest.mark.django_db

U = "user-services"


def _agent(agent: Agent) -> Caller:
    return Caller(role=ApiKey.Role.AGENT, agent=agent)


ADMIN = Caller(role=ApiKey.Role.ADMIN)


def _write(key: str, **fields: object) -> MemoryWrite:
    return MemoryWrite(user_id=U, key=key, value=f"value of {key}", **fields)  # type: ignore[arg-type]


def _keys() -> list[str]:
    return sorted(MemoryEntry.objects.filter(user_id=U).values_list("key", flat=True))


# --- The cap --------------------------------------------------------------------------------------------


def test_a_full_user_loses_the_writers_oldest_entry(agent_a, agent_b, set_policy):
    set_policy(agent_a, max_entries_per_user=2, on_cap_reached=OnCapReached.EVICT_OLDEST)
    memory_upsert(caller=_agent(agent_a), write=_write("a1"))
    memory_upsert(caller=_agent(agent_b), write=_write("b1"))
    memory_upsert(caller=_agent(agent_a), write=_write("a2"))

    result = memory_upsert(caller=_agent(agent_a), write=_write("a3"))

    assert result.created
    assert _keys() == ["a2", "a3", "b1"]  # a1 went: the writer's oldest; b1, older still, is agent b's
    evicted = MemoryEvent.objects.get(user_id=U, action=MemoryEvent.Action.EVICTED)
    assert evicted.key == "a1" and evicted.old_value == "value of a1"


def test_an_update_of_a_full_user_evicts_nothing(agent_a, set_policy):
    set_policy(agent_a, max_entries_per_user=2, on_cap_reached=OnCapReached.EVICT_OLDEST)
    for key in ("a1", "a2"):
        memory_upsert(caller=_agent(agent_a), write=_write(key))

    result = memory_upsert(caller=_agent(agent_a), write=_write("a1", category="preference"))

    assert not result.created and result.entry.category == "preference"
    assert _keys() == ["a1", "a2"]


def test_eviction_never_takes_another_agents_entries(agent_a, agent_b, set_policy):
    """The cap counts the writer's own entries of the user (issue 53): agent b's two, global ones included,
    neither fill agent a's room nor go when it is full."""
    set_policy(agent_a, max_entries_per_user=2, on_cap_reached=OnCapReached.EVICT_OLDEST)
    memory_upsert(caller=_agent(agent_b), write=_write("b1"))
    memory_upsert(caller=_agent(agent_b), write=_write("b2", visibility="global"))

    for key in ("a1", "a2", "a3"):
        assert memory_upsert(caller=_agent(agent_a), write=_write(key)).created

    assert _keys() == ["a2", "a3", "b1", "b2"]


def test_reject_refuses_a_new_key_and_tells_an_admin_the_count(agent_a, set_policy):
    set_policy(agent_a, max_entries_per_user=1, on_cap_reached=OnCapReached.REJECT)
    memory_upsert(caller=_agent(agent_a), write=_write("a1"))

    with pytest.raises(CapacityReached) as by_agent:
        memory_upsert(caller=_agent(agent_a), write=_write("a2"))
    with pytest.raises(CapacityReached) as by_admin:
        memory_upsert(caller=ADMIN, write=_write("a3", source_agent_id=agent_a.id))

    assert by_agent.value.details == {"limit": "maxEntriesPerUser", "max": 1}
    told = f"For user '{U}', agent 'agent-a' holds 1; the limit (maxEntriesPerUser) is 1"
    assert by_agent.value.message.startswith(told) and by_admin.value.message.startswith(told)
    assert _keys() == ["a1"]


# --- The turn limit -------------------------------------------------------------------------------------


def test_a_turn_holds_at_most_max_writes_per_turn(agent_a, set_policy):
    set_policy(agent_a, max_writes_per_turn=2)
    caller = _agent(agent_a)
    memory_upsert(caller=caller, write=_write("k1"), turn_id="turn-1")
    memory_upsert(caller=caller, write=_write("k2"), turn_id="turn-1")

    with pytest.raises(RateLimited) as refused:
        memory_upsert(caller=caller, write=_write("k3"), turn_id="turn-1")
    memory_upsert(caller=caller, write=_write("k4"), turn_id="turn-2")  # a new turn counts anew

    assert refused.value.details == {"limit": "maxWritesPerTurn", "max": 2}
    assert _keys() == ["k1", "k2", "k4"]


def test_a_batch_past_the_turn_limit_writes_nothing(agent_a, set_policy):
    set_policy(agent_a, max_writes_per_turn=2)

    with pytest.raises(RateLimited) as refused:
        memory_upsert_batch(
            caller=_agent(agent_a), writes=[_write("k1"), _write("k2"), _write("k3")], turn_id="turn-1"
        )

    assert refused.value.message.startswith("entries[2]: ") and refused.value.details["index"] == 2
    assert _keys() == []


def test_writes_without_a_turn_share_one_window_and_admin_keys_have_no_turns(agent_a, set_policy):
    set_policy(agent_a, max_writes_per_turn=1)
    memory_upsert(caller=_agent(agent_a), write=_write("k1"))

    with pytest.raises(RateLimited):
        memory_upsert(caller=_agent(agent_a), write=_write("k2"))
    for key in ("k3", "k4"):
        memory_upsert(caller=ADMIN, write=_write(key, source_agent_id=agent_a.id))

    assert _keys() == ["k1", "k3", "k4"]


# --- Groups ---------------------------------------------------------------------------------------------


def _groups(key: str) -> list[str]:
    entry = MemoryEntry.objects.get(user_id=U, key=key)
    return sorted(MemoryEntryGroup.objects.filter(entry_id=entry.id).values_list("group_id", flat=True))


def test_a_group_write_without_groups_takes_the_agents_groups(agent_a):
    AgentGroupFactory(id="ops", members=[agent_a])  # and "team", agent_a's fixture's

    memory_upsert(caller=_agent(agent_a), write=_write("k", visibility=Visibility.GROUP))

    assert _groups("k") == ["ops", "team"]


def test_an_agent_writes_only_to_its_own_groups(agent_a, agent_b):
    AgentGroupFactory(id="bteam", members=[agent_b])  # agent_a is in "team"

    with pytest.raises(Forbidden) as refused:
        memory_upsert(
            caller=_agent(agent_a),
            write=_write("k", visibility=Visibility.GROUP, group_ids=["team", "bteam"]),
        )

    assert refused.value.details == {"groups": ["bteam"]}
    assert _keys() == []


def test_a_group_write_needs_a_group(agent_a):
    lone = AgentFactory(id="agent-lone")  # in no group (agent_a is in "team")

    with pytest.raises(BadRequest, match="needs groupIds"):
        memory_upsert(caller=_agent(lone), write=_write("k", visibility=Visibility.GROUP))
    with pytest.raises(BadRequest, match="needs groupIds"):
        memory_upsert(
            caller=ADMIN, write=_write("k", visibility=Visibility.GROUP, source_agent_id=agent_a.id)
        )

    assert _keys() == []


def test_a_rewrite_replaces_the_entrys_groups(agent_a):
    AgentGroupFactory(id="ops", members=[agent_a])  # and "team", agent_a's fixture's
    caller = _agent(agent_a)
    memory_upsert(caller=caller, write=_write("k", visibility=Visibility.GROUP, group_ids=["team", "team"]))
    assert _groups("k") == ["team"]  # a group named twice is one

    memory_upsert(caller=caller, write=_write("k", visibility=Visibility.GROUP, group_ids=["ops"]))

    assert _groups("k") == ["ops"]
