"""Validity in time (issue 20): validFrom/validTo/supersededBy on every entry, reads of the entries valid now,
?includeSuperseded=true, and ?asOf= answered from history, through REST with the role keys."""

from datetime import timedelta

from django.utils import timezone

from tests.helpers import assert_envelope, internal_id
from usermemory.models import MemoryEntry

BASE = "/usermemorystore/memories"
U = "user-valid"


def _supersede(old_id: str, summary_id: str) -> None:
    """What a Dream summary does to an original (dream.services): kept, superseded, valid until now."""
    MemoryEntry.objects.filter(id=internal_id(old_id)).update(
        superseded_by_id=internal_id(summary_id), valid_to=timezone.now()
    )


def test_an_entry_is_valid_from_its_write_until_its_valid_to(agent_a_api, put):
    until = (timezone.now() + timedelta(days=3)).isoformat()
    entry = put(agent_a_api, userId=U, key="trip", value="Lisbon", validTo=until).json()
    assert entry["validFrom"] == entry["updatedAt"]
    assert entry["validTo"] is not None and entry["supersededBy"] is None
    listed = agent_a_api.get(f"{BASE}/{U}").json()
    assert [(e["key"], e["validTo"]) for e in listed] == [("trip", entry["validTo"])]
    plain = put(agent_a_api, userId=U, key="city", value="Porto").json()
    assert plain["validTo"] is None and plain["validFrom"]


def test_bad_valid_to_is_a_400(agent_a_api, put):
    past = (timezone.now() - timedelta(minutes=1)).isoformat()
    assert_envelope(put(agent_a_api, userId=U, key="k", value=1, validTo=past), 400, "bad_request")
    assert_envelope(put(agent_a_api, userId=U, key="k", value=1, validTo="next tuesday"), 400, "bad_request")
    assert not MemoryEntry.objects.filter(user_id=U).exists()


def test_superseded_entries_are_hidden_from_every_read_unless_asked(
    agent_a_api, viewer_api, put, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        old = put(agent_a_api, userId=U, key="city", value="Berlin", category="fact").json()
        summary = put(agent_a_api, userId=U, key="summary", value="Lives in Berlin", category="fact").json()
    _supersede(old["id"], summary["id"])
    for client in (agent_a_api, viewer_api):
        assert [e["key"] for e in client.get(f"{BASE}/{U}").json()] == ["summary"]
        assert [e["key"] for e in client.get(f"{BASE}/{U}/category/fact").json()] == ["summary"]
        assert client.get(f"{BASE}/{U}/count").json()["count"] == 1
        assert_envelope(client.get(f"{BASE}/{U}/key/city"), 404, "not_found")
        assert [e["key"] for e in client.get(f"{BASE}/{U}/search", {"q": "berlin"}).json()] == ["summary"]
        for mode in ("semantic", "hybrid"):
            found = client.get(f"{BASE}/{U}/search", {"q": "Berlin", "mode": mode}).json()
            assert [e["key"] for e in found] == ["summary"], (mode, found)
        everything = client.get(f"{BASE}/{U}", {"includeSuperseded": "true"}).json()
        assert {e["key"]: e["supersededBy"] for e in everything} == {"city": summary["id"], "summary": None}
        assert client.get(f"{BASE}/{U}/count", {"includeSuperseded": "true"}).json()["count"] == 2
        assert client.get(f"{BASE}/{U}/key/city", {"includeSuperseded": "true"}).json()["value"] == "Berlin"
        found = client.get(f"{BASE}/{U}/search", {"q": "berlin", "includeSuperseded": "true"}).json()
        assert {e["key"] for e in found} == {"city", "summary"}
    recalled = agent_a_api.get(f"{BASE}/{U}/visible").json()
    assert [e["key"] for e in recalled] == ["summary"]
    ranked = agent_a_api.get(f"{BASE}/{U}/visible", {"q": "where does the user live"}).json()
    assert [e["key"] for e in ranked] == ["summary"]
    # History still shows the superseded entry.
    assert [e["action"] for e in agent_a_api.get(f"{BASE}/entry/{old['id']}/history").json()] == ["created"]


def test_a_write_on_a_superseded_key_makes_it_current_again(agent_a_api, put):
    old = put(agent_a_api, userId=U, key="city", value="Berlin").json()
    summary = put(agent_a_api, userId=U, key="summary", value="Lives in Berlin").json()
    _supersede(old["id"], summary["id"])
    again = put(agent_a_api, userId=U, key="city", value="Hamburg").json()
    assert again["id"] == old["id"] and again["supersededBy"] is None and again["validTo"] is None
    assert {e["key"] for e in agent_a_api.get(f"{BASE}/{U}").json()} == {"city", "summary"}


def test_as_of_answers_from_history(agent_a_api, agent_b_api, viewer_api, admin_api, put):
    put(agent_a_api, userId=U, key="city", value="Berlin")
    gone = put(agent_a_api, userId=U, key="pet", value="a cat").json()
    put(agent_b_api, userId=U, key="secret", value="b only")
    then = timezone.now()
    put(agent_a_api, userId=U, key="city", value="Hamburg")
    put(agent_a_api, userId=U, key="job", value="baker")
    agent_a_api.delete(f"{BASE}/entry/{gone['id']}")

    now = {e["key"]: e["value"] for e in agent_a_api.get(f"{BASE}/{U}").json()}
    assert now == {"city": "Hamburg", "job": "baker"}
    past = agent_a_api.get(f"{BASE}/{U}", {"asOf": then.isoformat()}).json()
    assert {e["key"]: e["value"] for e in past} == {"city": "Berlin", "pet": "a cat"}  # not b's self entry
    recalled = agent_a_api.get(f"{BASE}/{U}/visible", {"asOf": then.isoformat()}).json()
    assert {e["key"]: e["value"] for e in recalled} == {"city": "Berlin", "pet": "a cat"}
    assert MemoryEntry.objects.get(user_id=U, key="city").access_count == 0  # asOf marks no access
    staff = viewer_api.get(f"{BASE}/{U}", {"asOf": then.isoformat()}).json()
    assert {e["key"] for e in staff} == {"city", "pet", "secret"}
    as_b = viewer_api.get(f"{BASE}/{U}/visible", {"asOf": then.isoformat(), "agentId": "agent-b"}).json()
    assert {e["key"] for e in as_b} == {"secret"}
    assert admin_api.get(f"{BASE}/{U}", {"asOf": "2000-01-01T00:00:00Z"}).json() == []


def test_bad_as_of_is_a_400(agent_a_api, put):
    put(agent_a_api, userId=U, key="city", value="Berlin")
    future = (timezone.now() + timedelta(days=1)).isoformat()
    for params in (
        {"asOf": "yesterday"},
        {"asOf": future},
        {"asOf": timezone.now().isoformat(), "includeSuperseded": "true"},
        {"asOf": timezone.now().isoformat(), "agentId": "agent-a"},
        {"asOf": timezone.now().isoformat(), "minConfidence": "0.5"},
    ):
        assert_envelope(agent_a_api.get(f"{BASE}/{U}", params), 400, "bad_request")
    recalled_then = {"asOf": timezone.now().isoformat(), "minConfidence": "0.5"}
    assert_envelope(agent_a_api.get(f"{BASE}/{U}/visible", recalled_then), 400, "bad_request")
    assert_envelope(agent_a_api.get(f"{BASE}/{U}/visible", {"asOf": "1 Jan"}), 400, "bad_request")
    assert_envelope(
        agent_a_api.get(f"{BASE}/{U}/visible", {"asOf": timezone.now().isoformat(), "q": "city"}),
        400,
        "bad_request",
    )
