"""Times a caller gives (issue 53, finding 1): every write door checks them in one place
(``usermemory.writerules.checked_time``), and the database holds the columns to the same range, so no stored
time can make a read fail; and ``asOf`` (finding 4) leaves out what had expired by then."""

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta

import pytest
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from tests.helpers import assert_envelope
from usermemory.models import MemoryEntry, MemoryEvent

BASE = "/usermemorystore/memories"
U = "user-times"
OUT_OF_RANGE = {
    "observedAt": [
        "0001-01-01T00:00:00+00:01",  # 1 BC in UTC: PostgreSQL stores it, no read could return it
        "0001-01-01T00:00:00Z",  # in Python's range, but not a day inside it (a read in another zone)
    ],
    "validTo": ["9999-12-31T23:00:00Z", "9999-12-31T23:59:59-01:00"],
}


@pytest.fixture
def written_at(monkeypatch) -> Callable[[datetime], Iterator[None]]:
    """``with written_at(t):`` the block runs with Django's clock at ``t``; writes take their time from it."""

    @contextmanager
    def _at(moment: datetime) -> Iterator[None]:
        with monkeypatch.context() as patch:
            patch.setattr(timezone, "now", lambda: moment)
            yield

    return _at


@pytest.mark.parametrize(("field", "value"), [(f, v) for f, values in OUT_OF_RANGE.items() for v in values])
def test_a_time_out_of_range_is_a_400_at_the_upsert_and_the_batch(agent_a_api, put, field, value):
    one = put(agent_a_api, userId=U, key="city", value="Lisbon", **{field: value})
    assert_envelope(one, 400, "bad_request")
    assert field in one.json()["error"], one.json()
    batch = agent_a_api.put(
        f"{BASE}/batch",
        [{"userId": U, "key": "a", "value": 1}, {"userId": U, "key": "b", "value": 2, field: value}],
        format="json",
    )
    assert_envelope(batch, 400, "bad_request")
    assert not MemoryEntry.objects.filter(user_id=U).exists()


def test_the_database_refuses_a_time_out_of_range_and_reads_go_on(agent_a_api, admin_api, put):
    """A row forced in by SQL is refused by the CHECK constraints: no stored time can fail a read."""
    entry = put(agent_a_api, userId=U, key="city", value="Lisbon").json()
    statements = [
        "UPDATE usermemory_memoryentry SET observed_at = '0001-01-01 00:00:00+00:01' WHERE user_id = %s",
        "UPDATE usermemory_memoryentry SET valid_to = '10000-01-01 00:00:00+00' WHERE user_id = %s",
        "UPDATE usermemory_memoryevent SET observed_at = '0001-12-31 23:59:00+00 BC' WHERE user_id = %s",
    ]
    for statement in statements:
        with pytest.raises(IntegrityError), transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(statement, [U])
    for path in (f"{BASE}/{U}", f"{BASE}/{U}/visible", f"{BASE}/entry/{entry['id']}/history"):
        assert agent_a_api.get(path).status_code == 200, path
    assert admin_api.get(f"{BASE}/{U}/export").status_code == 200
    assert admin_api.delete(f"{BASE}/{U}").status_code in (200, 204)


def test_as_of_leaves_out_what_had_expired_by_then(agent_a_api, agent_b_api, viewer_api, put, written_at):
    """An entry whose TTL or validTo had passed at ``asOf`` is not in the list nor in /visible then; before
    that, it is, with the validTo it had."""
    start = timezone.now() - timedelta(hours=2)
    with written_at(start):
        put(agent_a_api, userId=U, key="city", value="Berlin", visibility="global", ttlSeconds=60)
        until = (start + timedelta(minutes=30)).isoformat()
        put(agent_a_api, userId=U, key="mood", value="tired", visibility="global", validTo=until)
        put(agent_a_api, userId=U, key="job", value="baker", visibility="global")

    def keys(client, path: str, at: datetime) -> list[str]:
        answer = client.get(f"{BASE}/{U}{path}", {"asOf": at.isoformat()})
        assert answer.status_code == 200, answer.content
        return sorted(e["key"] for e in answer.json())

    readers = [(agent_a_api, ("", "/visible")), (agent_b_api, ("", "/visible")), (viewer_api, ("",))]
    for client, paths in readers:
        for path in paths:
            assert keys(client, path, start + timedelta(hours=1)) == ["job"], path
            assert keys(client, path, start + timedelta(minutes=10)) == ["job", "mood"], path
            assert keys(client, path, start + timedelta(seconds=30)) == ["city", "job", "mood"], path
    then = agent_a_api.get(f"{BASE}/{U}", {"asOf": (start + timedelta(seconds=30)).isoformat()}).json()
    valid_to = {e["key"]: e["validTo"] for e in then}
    assert valid_to["job"] is None
    assert datetime.fromisoformat(valid_to["city"]) == start + timedelta(seconds=60)
    assert datetime.fromisoformat(valid_to["mood"]) == start + timedelta(minutes=30)


def test_a_ttl_refresh_renews_the_time_its_value_held_in_history(agent_a_api, put):
    entry = put(agent_a_api, userId=U, key="plan", value="gym", ttlSeconds=600).json()
    refreshed = agent_a_api.post(f"{BASE}/{U}/ttl-refresh", {"ids": [entry["id"]]}, format="json")
    assert refreshed.json()["refreshed"] == 1
    stored = MemoryEntry.objects.get(user_id=U, key="plan")
    write = MemoryEvent.objects.get(entry_id=stored.pk, action=MemoryEvent.Action.CREATED)
    assert write.valid_to == stored.valid_to and stored.valid_to > datetime.fromisoformat(entry["validTo"])
