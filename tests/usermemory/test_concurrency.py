"""Concurrency on PostgreSQL: real threads, each with its own database connection."""

import threading
from collections.abc import Callable

import pytest
from django.db import connections
from rest_framework.test import APIClient

from apikeys.models import Agent
from memoryplatform.locks import LockId
from tests.factories import MemoryEntryFactory
from usermemory.models import AgentMemoryPolicy, MemoryEntry, MemoryEvent

pytestmark = [pytest.mark.django_db(transaction=True)]

BASE = "/usermemorystore/memories"


def run_at_once(count: int, work: Callable[[int, APIClient], int], raw_key: str) -> list[int]:
    """Run ``work(i, client)`` in ``count`` threads released together; return their status codes."""
    barrier = threading.Barrier(count)
    statuses: list[int] = [0] * count

    def target(i: int) -> None:
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw_key}")
        try:
            barrier.wait(timeout=30)
            statuses[i] = work(i, client)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=target, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return statuses


def test_twenty_simultaneous_upserts_of_one_key_leave_one_row(agent_a_api):
    def work(i, client):
        return client.put(
            BASE, {"userId": "race", "key": "k", "value": i}, format="json", headers={"X-Turn-Id": f"t{i}"}
        ).status_code

    statuses = run_at_once(20, work, agent_a_api.raw_key)
    assert sorted(statuses) == [200] * 19 + [201]
    assert MemoryEntry.objects.filter(user_id="race").count() == 1
    assert MemoryEvent.objects.filter(user_id="race", action="created").count() == 1
    assert MemoryEvent.objects.filter(user_id="race", action="updated").count() == 19


def test_twenty_simultaneous_global_upserts_from_two_agents(agent_a_api, agent_b_api):
    def work(i, client):
        if i % 2:
            client.credentials(HTTP_AUTHORIZATION=f"Bearer {agent_b_api.raw_key}")
        return client.put(
            BASE,
            {"userId": "race-g", "key": "k", "value": i, "visibility": "global"},
            format="json",
            headers={"X-Turn-Id": f"t{i}"},
        ).status_code

    statuses = run_at_once(20, work, agent_a_api.raw_key)
    assert statuses.count(201) == 1 and statuses.count(200) == 19
    assert MemoryEntry.objects.filter(user_id="race-g").count() == 1


@pytest.mark.parametrize("mode", ["reject", "evict_oldest"])
def test_writers_racing_past_the_cap_never_exceed_it(agent_a, agent_a_api, mode):
    AgentMemoryPolicy.objects.create(agent=agent_a, max_entries_per_user=5, on_cap_reached=mode)

    def work(i, client):
        return client.put(
            BASE,
            {"userId": "capped", "key": f"k{i}", "value": i},
            format="json",
            headers={"X-Turn-Id": f"t{i}"},
        ).status_code

    statuses = run_at_once(20, work, agent_a_api.raw_key)
    assert MemoryEntry.objects.filter(user_id="capped").count() == 5
    if mode == "reject":
        assert statuses.count(201) == 5 and statuses.count(409) == 15
    else:
        assert statuses == [201] * 20
        assert MemoryEvent.objects.filter(user_id="capped", action="evicted").count() == 15


def test_simultaneous_batches_are_all_or_nothing(admin_api):
    def work(i, client):
        entries = [
            {"userId": f"batch-{k % 3}", "key": f"k{k}", "value": i, "visibility": "global"}
            for k in range(10)
        ]
        if i % 2:  # odd batches carry one bad entry at the end
            entries.append({"userId": "batch-0", "key": "bad", "value": 1, "visibility": "self"})
        return client.put(f"{BASE}/batch", entries, format="json").status_code

    statuses = run_at_once(12, work, admin_api.raw_key)
    assert statuses.count(200) == 6 and statuses.count(400) == 6
    values = set(MemoryEntry.objects.filter(user_id__startswith="batch-").values_list("value", flat=True))
    # Every stored value comes from a successful (even) batch; no bad entry and no duplicate keys.
    assert values and all(v % 2 == 0 for v in values)
    assert MemoryEntry.objects.filter(user_id__startswith="batch-").count() == 10
    assert not MemoryEntry.objects.filter(key="bad").exists()


def _seed_global(user_id: str, count: int, source: Agent) -> None:
    MemoryEntryFactory.create_batch(count, user_id=user_id, visibility="global", source_agent=source)


# A recall in its order, and by relevance to a query (the seeded values are all "a value").
RECALLS = ["", "&q=value"]


@pytest.mark.parametrize("query", RECALLS)
def test_twenty_simultaneous_recalls_of_one_user_count_every_access(agent_a_api, agent_b, query):
    _seed_global("recalled", 10, agent_b)

    def work(i, client):
        order = "most_accessed" if i % 2 else "most_recent"
        return client.get(f"{BASE}/recalled/visible?order={order}&limit=10{query}").status_code

    statuses = run_at_once(20, work, agent_a_api.raw_key)
    assert statuses == [200] * 20
    # Only the 10 most_accessed recalls count (EDDI: most_recent has no side effect on accessCount).
    assert (
        list(MemoryEntry.objects.filter(user_id="recalled").values_list("access_count", flat=True))
        == [10] * 10
    )


@pytest.mark.parametrize("query", RECALLS)
def test_a_recall_queues_on_its_users_recall_lock(agent_a_api, agent_b, query):
    """Recalls of one user wait on the user's advisory lock (not on the rows' locks): while another
    transaction holds it, a recall waits there, and goes on once it is released."""
    _seed_global("locked", 3, agent_b)

    def recall_locked(_i: int, client: APIClient) -> int:
        return client.get(f"{BASE}/locked/visible?order=most_accessed{query}").status_code

    holder = connections.create_connection("default")
    try:
        with holder.cursor() as cursor:
            cursor.execute("BEGIN")
            cursor.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", [LockId.USER_RECALL, "locked"])
            done: list[int] = []
            thread = threading.Thread(
                target=lambda: done.extend(run_at_once(1, recall_locked, agent_a_api.raw_key))
            )
            thread.start()
            waiting = 0
            for _ in range(200):  # until the recall's backend waits on that advisory lock
                cursor.execute(
                    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
                    "AND classid = %s AND objsubid = 2 "  # this database's: pg_locks shows every database's
                    "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
                    [LockId.USER_RECALL],
                )
                waiting = cursor.fetchone()[0]
                if waiting:
                    break
                threading.Event().wait(0.05)
            assert waiting == 1
            assert not done
            cursor.execute("COMMIT")
        thread.join(timeout=30)
    finally:
        holder.close()
    assert done == [200]
    assert set(MemoryEntry.objects.filter(user_id="locked").values_list("access_count", flat=True)) == {1}


def test_simultaneous_first_changes_of_an_agents_policy_parts_all_hold(admin_api, agent_a):
    """Eight PATCHes at once, each the first change of a part's field of an agent with no policy rows yet:
    every one answers 200 (no unique violation when two make a part's row), and every change is kept."""
    changes = [
        {"maxRecallEntries": 9},
        {"guardrails": {"maxKeyLength": 20}},
        {"dreamConfig": {"enabled": True}},
        {"dreamConfig": {"pruneStaleAfterDays": 12}},
        {"extractionConfig": {"visibility": "group"}},
        {"extractionConfig": {"extractFromConversations": True}},
        {"toolCallRetentionDays": 4},
        {"llmBudget": 1.5},
    ]

    def work(i, client):
        return client.patch(
            f"/v1/agents/{agent_a.id}", {"memoryPolicy": changes[i]}, format="json"
        ).status_code

    assert run_at_once(len(changes), work, admin_api.raw_key) == [200] * len(changes)
    policy = admin_api.get(f"/v1/agents/{agent_a.id}").json()["memoryPolicy"]
    assert (policy["maxRecallEntries"], policy["guardrails"]["maxKeyLength"]) == (9, 20)
    assert (policy["dreamConfig"]["enabled"], policy["dreamConfig"]["pruneStaleAfterDays"]) == (True, 12)
    assert policy["extractionConfig"]["visibility"] == "group"
    assert policy["extractionConfig"]["extractFromConversations"] is True
    assert (policy["toolCallRetentionDays"], policy["llmBudget"]) == (4, 1.5)
