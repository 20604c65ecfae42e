import pytest

from tests.helpers import assert_envelope
from usermemory.models import MemoryEntry

BASE = "/usermemorystore/memories"


def entries(n, user="batch-user"):
    return [{"userId": user, "key": f"k{i}", "value": i} for i in range(n)]


def test_batch_upserts_all(admin_api, agent_a_api):
    response = agent_a_api.put(f"{BASE}/batch", entries(5), format="json", headers={"X-Turn-Id": "t"})
    assert response.status_code == 200, response.content
    assert [e["key"] for e in response.json()] == [f"k{i}" for i in range(5)]
    wrapped = agent_a_api.put(f"{BASE}/batch", {"entries": entries(2, "other")}, format="json")
    assert wrapped.status_code == 200
    assert MemoryEntry.objects.count() == 7


def test_batch_is_all_or_nothing_and_names_the_index(admin_api):
    items = entries(5)
    items[3]["visibility"] = "nope"
    body = assert_envelope(admin_api.put(f"{BASE}/batch", items, format="json"), 400, "bad_request")
    assert body["error"].startswith("entries[3]") and body["details"]["index"] == 3
    assert MemoryEntry.objects.count() == 0


def test_batch_rule_failure_rolls_back_earlier_entries(agent_a_api):
    items = entries(4)
    items[2]["sourceAgentId"] = "agent-b"
    body = assert_envelope(agent_a_api.put(f"{BASE}/batch", items, format="json"), 403, "forbidden")
    assert body["details"]["index"] == 2
    assert MemoryEntry.objects.count() == 0


def test_batch_limits(admin_api, db):
    assert_envelope(admin_api.put(f"{BASE}/batch", entries(101), format="json"), 400, "bad_request")
    assert_envelope(admin_api.put(f"{BASE}/batch", [], format="json"), 400, "bad_request")
    assert_envelope(admin_api.put(f"{BASE}/batch", {"x": 1}, format="json"), 400, "bad_request")
    assert (
        admin_api.put(
            f"{BASE}/batch", [dict(e, visibility="global") for e in entries(100)], format="json"
        ).status_code
        == 200
    )


@pytest.mark.parametrize("count", [11])
def test_batch_counts_each_write_in_the_turn(agent_a_api, count):
    body = assert_envelope(
        agent_a_api.put(f"{BASE}/batch", entries(count), format="json"), 429, "rate_limited"
    )
    assert body["details"]["index"] == 10
    assert MemoryEntry.objects.count() == 0
