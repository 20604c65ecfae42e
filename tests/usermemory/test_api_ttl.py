"""TTL (issue 30): ``ttlSeconds`` on the REST upsert and batch and the LLM tool sets ``validTo`` to the
write's time plus the TTL; after that time no read sees the entry, its history stays, a refresh renews it,
and Dream deletes it once the policy's ``pruneExpiredAfterDays`` have passed.

The clock is the test's: a write made "an hour ago" (Django's clock set back while it runs) with a TTL of a
minute expired 59 minutes ago for every read, which asks PostgreSQL for the time. No sleeps."""

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta

import pytest
from django.utils import timezone

from apikeys.models import AgentGroup
from dream.models import DreamPolicy
from dream.prune import dream_prune_stale
from tests.helpers import assert_envelope, internal_id
from usermemory.models import MemoryEntry, MemoryEvent

BASE = "/usermemorystore/memories"
U = "user-ttl"


@pytest.fixture
def written_at(monkeypatch) -> Callable[[datetime], Iterator[None]]:
    """``with written_at(t):`` the block runs with Django's clock at ``t``; writes take their time from it."""

    @contextmanager
    def _at(moment: datetime) -> Iterator[None]:
        with monkeypatch.context() as patch:
            patch.setattr(timezone, "now", lambda: moment)
            yield

    return _at


def _seconds(entry: dict) -> float:
    valid = datetime.fromisoformat(entry["validTo"]) - datetime.fromisoformat(entry["validFrom"])
    return valid.total_seconds()


def test_ttl_seconds_sets_valid_to_at_every_write_door(agent_a_api, put):
    one = put(agent_a_api, userId=U, key="mood", value="tired", ttlSeconds=90).json()
    assert _seconds(one) == 90 and one["validFrom"] == one["updatedAt"]
    batch = agent_a_api.put(
        f"{BASE}/batch",
        [{"userId": U, "key": "a", "value": 1, "ttlSeconds": 60}, {"userId": U, "key": "b", "value": 2}],
        format="json",
    ).json()
    assert [_seconds(batch[0]), batch[1]["validTo"]] == [60, None]
    tool = agent_a_api.post(
        "/v1/tools/rememberFact/invoke",
        {"userId": U, "arguments": {"key": "plan", "value": "gym", "category": "fact", "ttlSeconds": 3600}},
        format="json",
    )
    assert tool.status_code == 200, tool.content
    assert _seconds(agent_a_api.get(f"{BASE}/{U}/key/plan").json()) == 3600
    # A write without a TTL makes the value hold until changed again.
    assert put(agent_a_api, userId=U, key="mood", value="rested").json()["validTo"] is None


def test_bad_ttl_is_a_400_and_writes_nothing(agent_a_api, put):
    until = (timezone.now() + timedelta(days=1)).isoformat()
    for bad in (0, -5, 1.5, "soon", True, 10**12):
        assert_envelope(put(agent_a_api, userId=U, key="k", value=1, ttlSeconds=bad), 400, "bad_request")
    both = put(agent_a_api, userId=U, key="k", value=1, ttlSeconds=60, validTo=until)
    assert_envelope(both, 400, "bad_request")
    assert "not both" in both.json()["error"]
    tool = agent_a_api.post(
        "/v1/tools/rememberFact/invoke",
        {"userId": U, "arguments": {"key": "k", "value": "v", "category": "fact", "ttlSeconds": 0}},
        format="json",
    )
    assert tool.json()["result"].startswith("❌ Not remembered: ttlSeconds must be a whole number")
    assert not MemoryEntry.objects.filter(user_id=U).exists()


def test_an_expired_entry_is_seen_by_no_read_and_its_history_stays(
    agent_a_api, viewer_api, put, written_at, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        with written_at(timezone.now() - timedelta(hours=1)):
            gone = put(agent_a_api, userId=U, key="city", value="Berlin", ttlSeconds=60).json()
        kept = put(agent_a_api, userId=U, key="job", value="baker in Berlin", ttlSeconds=3600).json()
    assert datetime.fromisoformat(gone["validTo"]) < timezone.now()

    for client in (agent_a_api, viewer_api):
        assert [e["key"] for e in client.get(f"{BASE}/{U}").json()] == ["job"]
        assert [e["key"] for e in client.get(f"{BASE}/{U}/category/fact").json()] == ["job"]
        assert client.get(f"{BASE}/{U}/count").json()["count"] == 1
        assert_envelope(client.get(f"{BASE}/{U}/key/city"), 404, "not_found")
        for mode in ("keyword", "semantic", "hybrid"):
            found = client.get(f"{BASE}/{U}/search", {"q": "Berlin", "mode": mode}).json()
            assert [e["key"] for e in found] == ["job"], (mode, found)
    across = viewer_api.get("/v1/memories/search", {"q": "Berlin"}).json()
    assert [e["key"] for e in across] == ["job"]
    for params in ({}, {"q": "which city"}):
        assert [e["key"] for e in agent_a_api.get(f"{BASE}/{U}/visible", params).json()] == ["job"]
    tools = {
        name: agent_a_api.post(f"/v1/tools/{name}/invoke", {"userId": U, "arguments": args}, format="json")
        for name, args in (("recallMemories", {}), ("searchMemory", {"query": "Berlin"}))
    }
    for name, answer in tools.items():
        assert answer.status_code == 200 and "baker" in answer.json()["result"], name
        assert "city" not in answer.json()["result"], name

    # Still stored, and its history is whole: asked for, it is there.
    everything = agent_a_api.get(f"{BASE}/{U}", {"includeSuperseded": "true"}).json()
    assert {e["key"] for e in everything} == {"city", "job"}
    history = agent_a_api.get(f"{BASE}/entry/{gone['id']}/history").json()
    assert [(e["action"], e["newValue"]) for e in history] == [("created", "Berlin")]
    # A refresh renews only entries valid now: the expired one stays expired.
    refreshed = agent_a_api.post(f"{BASE}/{U}/ttl-refresh", {"ids": [gone["id"], kept["id"]]}, format="json")
    assert refreshed.json() == {"userId": U, "refreshed": 1}
    assert_envelope(agent_a_api.get(f"{BASE}/{U}/key/city"), 404, "not_found")


def test_a_refresh_renews_the_ttl_of_readable_entries_only(
    agent_a_api, agent_b_api, viewer_api, put, written_at
):
    with written_at(timezone.now() - timedelta(seconds=50)):
        mine = put(agent_a_api, userId=U, key="mood", value="tired", ttlSeconds=60).json()
    forever = put(agent_a_api, userId=U, key="name", value="Ada").json()
    theirs = put(agent_b_api, userId=U, key="secret", value="b only", ttlSeconds=60).json()
    before = {e["key"]: e["validTo"] for e in viewer_api.get(f"{BASE}/{U}").json()}

    ids = [mine["id"], forever["id"], theirs["id"], "12345"]
    answer = agent_a_api.post(f"{BASE}/{U}/ttl-refresh", {"ids": ids}, format="json")
    assert answer.status_code == 200 and answer.json()["refreshed"] == 1

    after = {e["key"]: e for e in viewer_api.get(f"{BASE}/{U}").json()}
    renewed = datetime.fromisoformat(after["mood"]["validTo"])
    assert renewed - datetime.fromisoformat(before["mood"]) >= timedelta(seconds=49)
    assert abs((renewed - timezone.now()).total_seconds() - 60) < 5
    assert after["name"]["validTo"] is None and after["secret"]["validTo"] == before["secret"]  # b's: unseen
    # A refresh changes no value: no history event.
    assert len(agent_a_api.get(f"{BASE}/entry/{mine['id']}/history").json()) == 1
    refresh = f"{BASE}/{U}/ttl-refresh"
    assert_envelope(viewer_api.post(refresh, {"ids": ids}, format="json"), 403, "forbidden")
    assert_envelope(agent_a_api.post(refresh, {"ids": "x"}, format="json"), 400, "bad_request")


def test_a_refresh_renews_only_entries_the_caller_may_write(
    agent_a_api, agent_b_api, viewer_api, put, written_at
):
    """Issue 44, finding 18: renewing is writing, so an agent renews what its upsert would write: its own
    entries and global ones (one per user and key: it could overwrite the value), never another agent's group
    entry that it only reads."""
    AgentGroup.objects.get(id="team").members.add(agent_b_api.agent)
    with written_at(timezone.now() - timedelta(seconds=50)):
        shared = put(
            agent_b_api,
            userId=U,
            key="plan",
            value="b's",
            visibility="group",
            groupIds=["team"],
            ttlSeconds=60,
        ).json()
        public = put(
            agent_b_api, userId=U, key="mood", value="calm", visibility="global", ttlSeconds=60
        ).json()
    assert [e["key"] for e in agent_a_api.get(f"{BASE}/{U}/category/fact").json()] == ["mood", "plan"]
    before = {e["key"]: e["validTo"] for e in viewer_api.get(f"{BASE}/{U}").json()}

    refresh = f"{BASE}/{U}/ttl-refresh"
    answer = agent_a_api.post(refresh, {"ids": [shared["id"], public["id"]]}, format="json")
    assert answer.status_code == 200 and answer.json()["refreshed"] == 1
    after = {e["key"]: e["validTo"] for e in viewer_api.get(f"{BASE}/{U}").json()}
    assert after["plan"] == before["plan"]  # b's group entry: a reads it, may not write it
    assert after["mood"] != before["mood"]  # a global entry: a's upsert on its key would write it
    # Its owner renews it.
    assert agent_b_api.post(refresh, {"ids": [shared["id"]]}, format="json").json()["refreshed"] == 1
    assert viewer_api.get(f"{BASE}/{U}/key/plan").json()["validTo"] != before["plan"]


def test_dream_prunes_expired_entries_after_the_policys_retention(
    agent_a, agent_a_api, admin_api, put, written_at, set_policy
):
    with written_at(timezone.now() - timedelta(days=10)):
        old = put(agent_a_api, userId=U, key="trip", value="Lisbon", ttlSeconds=60).json()
    recent = put(agent_a_api, userId=U, key="mood", value="tired", ttlSeconds=60).json()
    lasting = put(agent_a_api, userId=U, key="name", value="Ada").json()
    patched = admin_api.patch(
        f"/v1/agents/{agent_a.id}",
        {"memoryPolicy": {"dreamConfig": {"pruneExpiredAfterDays": 7, "pruneStaleAfterDays": 0}}},
        format="json",
    )
    assert patched.json()["memoryPolicy"]["dreamConfig"]["pruneExpiredAfterDays"] == 7
    policy = DreamPolicy.objects.get(agent=agent_a)

    assert dream_prune_stale(policy=policy).pruned == 1
    assert set(MemoryEntry.objects.filter(user_id=U).values_list("key", flat=True)) == {"mood", "name"}
    history = admin_api.get(f"{BASE}/entry/{old['id']}/history").json()  # staff read a deleted entry's
    assert [(e["action"], e["actorType"]) for e in history] == [("created", "agent"), ("pruned", "dream")]
    # Eight days on, the second has been expired for as long; the entry without validTo never expires.
    assert dream_prune_stale(policy=policy, now=timezone.now() + timedelta(days=8)).pruned == 1
    assert list(MemoryEntry.objects.filter(user_id=U).values_list("id", flat=True)) == [
        internal_id(lasting["id"])
    ]
    assert MemoryEvent.objects.filter(entry_id=internal_id(recent["id"]), action="pruned").exists()
    # 0 keeps expired entries.
    set_policy(agent_a, prune_expired_after_days=0, prune_stale_after_days=0)
    policy = DreamPolicy.objects.get(agent=agent_a)
    assert dream_prune_stale(policy=policy, now=timezone.now() + timedelta(days=400)).pruned == 0
