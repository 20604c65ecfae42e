"""Guardrails, turns and caps: one failing case each, with the right code and a message naming the limit."""

import pytest

from tests.helpers import assert_envelope
from usermemory.models import MemoryEntry, MemoryEvent

BASE = "/usermemorystore/memories"
U = "user-7"


def test_key_length(agent_a, agent_a_api, put, set_policy):
    set_policy(agent_a, max_key_length=10)
    assert put(agent_a_api, userId=U, key="k" * 10, value="v").status_code == 201
    body = assert_envelope(put(agent_a_api, userId=U, key="k" * 11, value="v"), 400, "bad_request")
    assert "maxKeyLength" in body["error"] and "10" in body["error"]
    assert MemoryEntry.objects.count() == 1


def test_value_length_counts_the_value_text(agent_a, agent_a_api, put, set_policy):
    set_policy(agent_a, max_value_length=5)
    assert put(agent_a_api, userId=U, key="a", value="12345").status_code == 201
    body = assert_envelope(put(agent_a_api, userId=U, key="b", value="123456"), 400, "bad_request")
    assert "maxValueLength" in body["error"]
    assert_envelope(put(agent_a_api, userId=U, key="c", value={"long": "object"}), 400, "bad_request")


def test_category_must_be_allowed(agent_a_api, put):
    body = assert_envelope(
        put(agent_a_api, userId=U, key="a", value="v", category="gossip"), 400, "bad_request"
    )
    assert "allowedCategories" in body["error"] and "gossip" in body["error"]
    assert put(agent_a_api, userId=U, key="a", value="v", category="context").status_code == 201


def test_admin_writes_skip_agent_guardrails(admin_api, put):
    assert (
        put(
            admin_api, userId=U, key="x" * 200, value="v" * 5000, category="anything", visibility="global"
        ).status_code
        == 201
    )


@pytest.mark.parametrize("turn", ["header", "body", "window"])
def test_writes_per_turn_ten_pass_eleventh_refused(agent_a_api, put, turn):
    def write(n):
        if turn == "header":
            return put(agent_a_api, headers={"X-Turn-Id": "turn-1"}, userId=U, key=f"k{n}", value="v")
        if turn == "body":
            return put(agent_a_api, userId=U, key=f"k{n}", value="v", turnId="turn-1")
        return put(agent_a_api, userId=U, key=f"k{n}", value="v")

    for n in range(10):
        assert write(n).status_code == 201
    body = assert_envelope(write(10), 429, "rate_limited")
    assert "maxWritesPerTurn" in body["error"] and "10" in body["error"]
    assert_envelope(write(11), 429, "rate_limited")
    assert MemoryEntry.objects.count() == 10
    if turn != "window":
        # A new turn starts a new count.
        other = put(agent_a_api, headers={"X-Turn-Id": "turn-2"}, userId=U, key="k99", value="v")
        assert other.status_code == 201


def test_turns_are_per_user_and_per_agent(agent_a_api, agent_b_api, put):
    for n in range(10):
        put(agent_a_api, userId=U, key=f"k{n}", value="v")
    assert put(agent_a_api, userId="someone-else", key="k", value="v").status_code == 201
    assert put(agent_b_api, userId=U, key="k", value="v").status_code == 201


def test_a_batch_counts_each_write_in_the_turn_and_names_the_first_past_the_limit(agent_a_api, put):
    """A batch's writes count in the turn one by one, per user, as single writes do: interleaved users, the
    eleventh write of one user is the refused index, nothing of the batch is written, and the turn's count
    is as before. A bad entry before that index is the refusal instead."""
    from usermemory.models import TurnWriteCount

    def batch(entries):
        return agent_a_api.put(f"{BASE}/batch", {"entries": entries, "turnId": "t1"}, format="json")

    for n in range(4):
        assert put(agent_a_api, userId=U, key=f"k{n}", value="v", turnId="t1").status_code == 201
    entries = [{"userId": U if n % 2 else "other", "key": f"b{n}", "value": "v"} for n in range(16)]
    body = assert_envelope(batch(entries), 429, "rate_limited")  # U's writes: 1, 3, ..., 13 are its 5th..
    assert body["details"]["index"] == 13 and "maxWritesPerTurn" in body["error"]
    assert MemoryEntry.objects.count() == 4
    assert TurnWriteCount.objects.get(user_id=U).count == 4
    assert not TurnWriteCount.objects.filter(user_id="other").exists()

    bad = [*entries[:5], {"userId": U, "key": "", "value": "v"}, *entries[6:]]
    assert assert_envelope(batch(bad), 400, "bad_request")["details"]["index"] == 5
    ok = batch(entries[:12] + [{"userId": "other", "key": "z", "value": "v"}])  # U's 5th..10th
    assert ok.status_code == 200, ok.content
    assert TurnWriteCount.objects.get(user_id=U).count == 10
    assert TurnWriteCount.objects.get(user_id="other").count == 7


def test_window_turn_resets_after_sixty_seconds(agent_a_api, put):
    from datetime import timedelta

    from django.utils import timezone

    from usermemory.models import TurnWriteCount

    for n in range(10):
        put(agent_a_api, userId=U, key=f"k{n}", value="v")
    TurnWriteCount.objects.update(window_start=timezone.now() - timedelta(seconds=61))
    assert put(agent_a_api, userId=U, key="k10", value="v").status_code == 201


def test_reject_refuses_new_entries_at_the_cap(agent_a, agent_a_api, put, set_policy):
    set_policy(agent_a, max_entries_per_user=2, on_cap_reached="reject")
    put(agent_a_api, userId=U, key="a", value="1")
    put(agent_a_api, userId=U, key="b", value="2")
    body = assert_envelope(put(agent_a_api, userId=U, key="c", value="3"), 409, "capacity")
    assert "maxEntriesPerUser" in body["error"] and "reject" in body["error"]
    # Updating an existing key is not a new entry.
    assert put(agent_a_api, userId=U, key="a", value="1b").status_code == 200
    assert MemoryEntry.objects.count() == 2


def test_evict_oldest_deletes_only_own_oldest(agent_a, agent_a_api, agent_b_api, put, set_policy):
    set_policy(agent_a, max_entries_per_user=2, on_cap_reached="evict_oldest")
    put(agent_b_api, userId=U, key="b-entry", value="b")
    put(agent_a_api, userId=U, key="old", value="1")
    put(agent_a_api, userId=U, key="new", value="2")
    assert put(agent_a_api, userId=U, key="newest", value="3").status_code == 201
    assert set(MemoryEntry.objects.values_list("key", flat=True)) == {"b-entry", "new", "newest"}
    evicted = MemoryEvent.objects.get(action="evicted")
    assert evicted.key == "old" and evicted.old_value == "1"


def test_another_agents_entries_take_none_of_the_writers_room(
    agent_a, agent_a_api, agent_b_api, put, set_policy
):
    """The cap counts the writer's own entries (issue 53): agent b's, even global ones agent a reads, neither
    refuse agent a's writes nor are evicted by them."""
    set_policy(agent_a, max_entries_per_user=2, on_cap_reached="evict_oldest")
    put(agent_b_api, userId=U, key="b1", value="b", visibility="global")
    put(agent_b_api, userId=U, key="b2", value="b")
    for key in ("a1", "a2", "a3"):
        assert put(agent_a_api, userId=U, key=key, value="1").status_code == 201
    assert set(MemoryEntry.objects.values_list("key", flat=True)) == {"b1", "b2", "a2", "a3"}


@pytest.mark.parametrize("hidden", [2, 6])
def test_evict_oldest_evicts_one_entry_per_new_entry_so_the_count_never_shows(
    agent_a, agent_a_api, agent_b_api, put, set_policy, hidden
):
    """Over the cap (lowered), a new entry evicts exactly one of the writer's own: what agent A is told, and
    what history shows it, is the same whether agent B holds 2 entries it cannot see or 6."""
    for n in range(hidden):
        put(agent_b_api, userId=U, key=f"b{n}", value="b")
    for n in range(3):
        put(agent_a_api, userId=U, key=f"a{n}", value=str(n))
    set_policy(agent_a, max_entries_per_user=2, on_cap_reached="evict_oldest")
    total, events = MemoryEntry.objects.count(), MemoryEvent.objects.count()
    response = put(agent_a_api, userId=U, key="new", value="n")
    assert response.status_code == 201
    assert MemoryEntry.objects.count() == total  # the user did not grow: one out per one in
    new_events = MemoryEvent.objects.order_by("id")[events:]
    assert sorted((e.action, e.key) for e in new_events) == [("created", "new"), ("evicted", "a0")]
    visible = agent_a_api.get(f"/usermemorystore/memories/{U}").json()
    assert sorted(e["key"] for e in visible) == ["a1", "a2", "new"]
