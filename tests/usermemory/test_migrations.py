"""Data migrations, run forward on rows written before them."""

from datetime import timedelta

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

BEFORE = [("usermemory", "0007_policy_change_notify")]
AFTER = [("usermemory", "0008_event_visibility")]
FOLDED = [("usermemory", "0009_search_without_trigrams")]


@pytest.fixture(autouse=True)
def _back_to_the_latest_schema():
    """Each test migrates back; the tests after it need every migration applied."""
    yield
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


@pytest.mark.django_db(transaction=True)
def test_existing_events_take_their_entrys_scope_or_the_most_restrictive():
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    apps = executor.loader.project_state(BEFORE).apps
    Agent = apps.get_model("apikeys", "Agent")
    Entry = apps.get_model("usermemory", "MemoryEntry")
    Event = apps.get_model("usermemory", "MemoryEvent")
    now = timezone.now()
    Agent.objects.create(id="agent-m")
    entry = Entry.objects.create(
        user_id="u",
        key="k",
        value="v",
        value_text="v",
        category="fact",
        visibility="group",
        source_agent_id="agent-m",
        group_ids=["g1"],
        created_at=now,
        updated_at=now,
    )
    common = {"user_id": "u", "key": "k", "actor_type": "agent", "actor_id": "agent-m", "created_at": now}
    kept = Event.objects.create(entry_id=entry.id, action="created", new_value="v", **common)
    orphan = Event.objects.create(entry_id=entry.id + 1000, action="deleted", old_value="gone", **common)

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(AFTER)
    Event = executor.loader.project_state(AFTER).apps.get_model("usermemory", "MemoryEvent")
    scope = ("owner", "old_visibility", "old_group_ids", "visibility", "group_ids")
    assert Event.objects.values_list(*scope).get(id=kept.id) == ("agent-m", "group", ["g1"], "group", ["g1"])
    assert Event.objects.values_list(*scope).get(id=orphan.id) == ("", "self", [], "self", [])


@pytest.mark.django_db(transaction=True)
def test_existing_entries_get_their_casefolded_search_columns():
    executor = MigrationExecutor(connection)
    executor.migrate(AFTER)
    Entry = executor.loader.project_state(AFTER).apps.get_model("usermemory", "MemoryEntry")
    now = timezone.now()
    common = {
        "user_id": "u",
        "category": "fact",
        "visibility": "global",
        "created_at": now,
        "updated_at": now,
    }
    entries = [
        Entry.objects.create(key=f"Key{n} STRASSE", value="Straße ﬁ", value_text="Straße ﬁ", **common)
        for n in range(3)
    ]

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(FOLDED)
    Entry = executor.loader.project_state(FOLDED).apps.get_model("usermemory", "MemoryEntry")
    folded = set(
        Entry.objects.filter(id__in=[e.id for e in entries]).values_list("key_folded", "text_folded")
    )
    assert folded == {(f"key{n} strasse", "strasse fi") for n in range(3)}


@pytest.mark.django_db(transaction=True)
def test_existing_entries_are_observed_at_their_last_write_and_their_write_events_at_theirs():
    before, after = [("usermemory", "0025_policy_llm_budget")], [("usermemory", "0026_observed_at")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    apps = executor.loader.project_state(before).apps
    Entry = apps.get_model("usermemory", "MemoryEntry")
    Event = apps.get_model("usermemory", "MemoryEvent")
    written = timezone.now() - timedelta(days=30)
    entry = Entry.objects.create(
        user_id="u",
        key="k",
        value="v",
        value_text="v",
        category="fact",
        visibility="global",
        created_at=written - timedelta(days=1),
        updated_at=written,
    )
    common = {"entry_id": entry.id, "user_id": "u", "key": "k", "actor_type": "key", "actor_id": "admin"}
    update = Event.objects.create(action="updated", new_value="v", created_at=written, **common)
    deletion = Event.objects.create(action="deleted", old_value="v", created_at=written, **common)

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(after)
    apps = executor.loader.project_state(after).apps
    assert apps.get_model("usermemory", "MemoryEntry").objects.get(id=entry.id).observed_at == written
    Event = apps.get_model("usermemory", "MemoryEvent")
    assert Event.objects.get(id=update.id).observed_at == written
    assert Event.objects.get(id=deletion.id).observed_at is None
