"""Time order (issue 46): every value carries the time of what it says (``observedAt``), and a write observed
before the stored value on its key was is not written, at every door: REST upsert and batch, an import
line, and against a staff correction in the admin."""

import json
from datetime import UTC, datetime, timedelta
from io import StringIO
from pathlib import Path
from typing import Any

from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone

from tests.helpers import assert_envelope, internal_id
from usermemory.models import MemoryEntry, MemoryEvent

BASE = "/usermemorystore/memories"
U = "u-time"
JAN = "2026-01-10T09:00:00Z"
MAR = "2026-03-10T09:00:00Z"


def put(client: Any, key: str, value: Any, **more: Any) -> Any:
    return client.put(BASE, {"userId": U, "key": key, "value": value, **more}, format="json")


def at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def test_an_older_observation_is_answered_with_the_stored_entry_and_both_times(agent_a_api):
    newer = put(agent_a_api, "home_city", "Porto", observedAt=MAR)
    assert newer.status_code == 201, newer.content
    assert newer.json()["observedAt"] == MAR and "skipped" not in newer.json()

    older = put(agent_a_api, "home_city", "Lisbon", observedAt=JAN)

    assert older.status_code == 200, older.content
    body = older.json()
    assert body["value"] == "Porto" and body["id"] == newer.json()["id"]
    assert body["observedAt"] == MAR
    assert body["skipped"]["observedAt"] == JAN and body["skipped"]["storedObservedAt"] == MAR
    assert "observed" in body["skipped"]["reason"]
    entry = MemoryEntry.objects.get(user_id=U, key="home_city")
    assert (entry.value, entry.observed_at) == ("Porto", at(MAR))
    assert MemoryEvent.objects.filter(entry_id=entry.id).count() == 1  # no event for the write left out


def test_a_write_observed_later_or_at_the_same_time_replaces_the_value(agent_a_api):
    put(agent_a_api, "home_city", "Lisbon", observedAt=JAN)
    same = put(agent_a_api, "home_city", "Lisboa", observedAt=JAN)
    assert same.status_code == 200 and same.json()["value"] == "Lisboa" and "skipped" not in same.json()
    later = put(agent_a_api, "home_city", "Porto", observedAt=MAR)
    assert later.json()["value"] == "Porto" and later.json()["observedAt"] == MAR
    history = agent_a_api.get(f"{BASE}/entry/{later.json()['id']}/history").json()
    assert [(e["newValue"], e["observedAt"]) for e in history] == [
        ("Lisbon", JAN),
        ("Lisboa", JAN),
        ("Porto", MAR),
    ]


def test_a_write_without_observed_at_is_observed_when_written(agent_a_api):
    before = timezone.now()
    body = put(agent_a_api, "diet", "vegetarian").json()
    observed = at(body["observedAt"])
    assert before <= observed <= timezone.now()
    # ... so a later write that gives an earlier time is left out
    assert (
        put(agent_a_api, "diet", "vegan", observedAt=JAN).json()["skipped"]["storedObservedAt"]
        == (body["observedAt"])
    )


def test_observed_at_in_the_future_is_refused_and_a_clock_slightly_ahead_is_taken_as_now(agent_a_api):
    far = (timezone.now() + timedelta(hours=1)).isoformat()
    refused = put(agent_a_api, "k", "v", observedAt=far)
    assert "observedAt" in assert_envelope(refused, 400, "bad_request")["error"]
    assert not MemoryEntry.objects.filter(user_id=U).exists()
    ahead = timezone.now() + timedelta(seconds=30)
    written = put(agent_a_api, "k", "v", observedAt=ahead.isoformat())
    assert written.status_code == 201 and at(written.json()["observedAt"]) < ahead


def test_a_batch_skips_each_older_entry_and_writes_the_others(agent_a_api):
    put(agent_a_api, "home_city", "Porto", observedAt=MAR)
    entries = [
        {"userId": U, "key": "home_city", "value": "Lisbon", "observedAt": JAN},
        {"userId": U, "key": "language", "value": "Portuguese", "observedAt": JAN},
    ]

    response = agent_a_api.put(f"{BASE}/batch", entries, format="json")

    assert response.status_code == 200, response.content
    city, language = response.json()
    assert city["value"] == "Porto" and city["skipped"]["storedObservedAt"] == MAR
    assert language["value"] == "Portuguese" and "skipped" not in language
    assert MemoryEntry.objects.get(user_id=U, key="home_city").value == "Porto"


def _import(tmp_path: Path, *lines: dict[str, Any]) -> str:
    path = tmp_path / "lines.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    out = StringIO()
    call_command("import", str(path), "--no-progress", stdout=out, stderr=StringIO())
    return out.getvalue()


def test_an_import_line_older_than_the_stored_value_is_skipped_and_reported(tmp_path, agent_a, agent_a_api):
    put(agent_a_api, "home_city", "Porto", observedAt=MAR)
    line = {"userId": U, "key": "home_city", "value": "Lisbon", "sourceAgentId": "agent-a"}

    out = _import(tmp_path, {**line, "observedAt": JAN}, {**line, "key": "pet", "observedAt": JAN})

    assert "1 written (1 new, 0 updated)" in out, out
    assert f"line 1: skipped (time order): the stored value was observed at {at(MAR).isoformat()}" in out
    assert MemoryEntry.objects.get(user_id=U, key="home_city").value == "Porto"
    assert MemoryEntry.objects.get(user_id=U, key="pet").observed_at == at(JAN)


def test_an_export_listed_then_imported_keeps_its_times(tmp_path, agent_a, agent_a_api):
    """What a read returns carries observedAt, and an import takes it: an old export imported again does
    not write over what was learned since."""
    listed = put(agent_a_api, "home_city", "Lisbon", observedAt=JAN).json()
    put(agent_a_api, "home_city", "Porto", observedAt=MAR)
    out = _import(tmp_path, {**listed, "sourceAgentId": "agent-a"})
    assert "0 written" in out and "skipped (time order)" in out
    assert MemoryEntry.objects.get(user_id=U, key="home_city").value == "Porto"


def test_a_staff_correction_is_observed_now_so_an_older_write_cannot_revert_it(
    agent_a_api, admin_user, client
):
    entry = put(agent_a_api, "home_city", "Lisbon", observedAt=JAN).json()
    client.force_login(admin_user)
    url = reverse("admin:usermemory_memoryentry_correct", args=[internal_id(entry["id"])])
    page = client.post(url, {"value": "Porto"})
    assert page.status_code == 302, page.content
    corrected = MemoryEntry.objects.get(user_id=U, key="home_city")
    assert corrected.value == "Porto" and corrected.observed_at > at(MAR)

    replay = put(agent_a_api, "home_city", "Lisbon", observedAt=MAR)  # a message from before the correction

    assert replay.json()["value"] == "Porto"
    assert replay.json()["skipped"]["storedObservedAt"] == replay.json()["observedAt"]


def test_a_mem0_record_is_observed_at_its_updated_at(tmp_path, agent_a, agent_a_api):
    put(agent_a_api, "mem0:m-1", "Porto", observedAt=MAR)
    record = {"id": "m-1", "memory": "Lisbon", "user_id": U, "agent_id": "agent-a"}
    path = tmp_path / "mem0.jsonl"
    older = {**record, "updated_at": "2026-01-10T02:00:00-07:00"}  # JAN, in mem0's own offset
    naive = {**record, "id": "m-2", "updated_at": "2026-01-10T09:00:00"}  # no zone: not a time to go by
    path.write_text(json.dumps(older) + "\n" + json.dumps(naive) + "\n")
    out = StringIO()
    call_command("import", str(path), "--format", "mem0", "--no-progress", stdout=out, stderr=StringIO())
    assert "line 1: skipped (time order)" in out.getvalue()
    assert MemoryEntry.objects.get(user_id=U, key="mem0:m-1").value == "Porto"
    assert MemoryEntry.objects.get(user_id=U, key="mem0:m-2").observed_at > at(MAR)  # the import's time


def test_the_value_staff_keep_when_settling_a_conflict_is_observed_now(
    agent_a, agent_b, agent_a_api, agent_b_api, admin_user, client
):
    mine = put(agent_a_api, "home_city", "Lisbon", observedAt=JAN).json()
    theirs = put(agent_b_api, "home_city", "Porto", observedAt=JAN).json()
    MemoryEntry.objects.filter(user_id=U).update(conflicted=True)
    client.force_login(admin_user)
    ids = [str(internal_id(e["id"])) for e in (mine, theirs)]
    body = {"user_id": U, "entry": ids, "keep": ids[1], "mode": "update", "keys": "home_city"}
    assert client.post(reverse("admin:usermemory_memoryconflict_changelist"), body).status_code == 302
    assert set(MemoryEntry.objects.filter(user_id=U).values_list("value", flat=True)) == {"Porto"}

    replay = put(agent_a_api, "home_city", "Lisbon", observedAt=MAR)  # a message from before the settling

    assert replay.json()["value"] == "Porto" and "skipped" in replay.json()
