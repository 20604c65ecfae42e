"""The vector queue (issue 31): a write queues its entry in its own transaction and nothing of the embedding
runs in its request (the default, EMBEDDINGS_INLINE_MAX_CHARS=0); the drain task embeds it; a text changed
while it was being embedded is embedded again; the queue's rows go with their entries; the backlog is
exported."""

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest
from django.conf import settings as django_settings
from django.core.management import call_command
from django.db import transaction
from django.test import override_settings
from prometheus_client import REGISTRY

from memoryplatform.embeddings import consumer, get_embedder
from memoryplatform.embeddings.store import queue_claim, queue_done
from tests.helpers import internal_id
from usermemory.embedding import ENTRIES, text_hash
from usermemory.models import EntryEmbedding, MemoryEntry, PendingEntryVector

U = "user-queue"


@pytest.fixture(autouse=True)
def _default_write_path(settings) -> Iterator[None]:  # type: ignore[no-untyped-def]
    """The default: no text is embedded in its request."""
    settings.EMBEDDINGS_INLINE_MAX_CHARS = 0
    get_embedder.cache_clear()
    yield
    get_embedder.cache_clear()


def _queued() -> set[int]:
    return set(PendingEntryVector.objects.values_list("entry_id", flat=True))


def _sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


@pytest.mark.django_db(transaction=True)
def test_a_committed_write_is_queued_not_embedded_and_the_drain_task_embeds_it(agent_a_api, put):
    """The write queues its entry and embeds nothing; the ``vectors.drain`` task (run here; a worker runs it
    when the write's commit enqueues it: tests/usermemory/test_vector_tasks.py) embeds it."""
    from memoryplatform.tasks import vectors_drain

    lags = _sample("embedding_vector_lag_seconds_count", kind=ENTRIES.name)
    response = put(agent_a_api, userId=U, key="drink", value="green tea, no sugar")
    assert response.status_code == 201, response.content
    entry_id = internal_id(response.json()["id"])
    assert _queued() == {entry_id} and not EntryEmbedding.objects.exists()

    done = vectors_drain.apply().get()

    assert (done["claimed"], done["written"], done["more"]) == (1, 1, False)
    assert EntryEmbedding.objects.get(entry_id=entry_id).text_hash == text_hash("drink: green tea, no sugar")
    assert _queued() == set()
    assert _sample("embedding_vector_lag_seconds_count", kind=ENTRIES.name) == lags + 1


def test_the_write_queues_in_its_transaction_and_a_rolled_back_one_queues_nothing(agent_a_api, put):
    entry = put(agent_a_api, userId=U, key="city", value="Porto").json()
    assert _queued() == {internal_id(entry["id"])}
    assert not EntryEmbedding.objects.exists()  # nothing in the request
    with pytest.raises(RuntimeError), transaction.atomic():
        MemoryEntry.objects.filter(id=internal_id(entry["id"])).update(value_text="Lisbon")
        PendingEntryVector.objects.all().delete()
        MemoryEntry.objects.filter(id=internal_id(entry["id"])).update(value_text="Faro")
        raise RuntimeError("rolled back")
    assert _queued() == {internal_id(entry["id"])}


def test_only_a_change_of_key_or_value_queues_again(agent_a_api, put):
    entry = put(agent_a_api, userId=U, key="city", value="Porto").json()
    call_command("embed", "--drain")
    assert _queued() == set()
    assert put(agent_a_api, userId=U, key="city", value="Porto").status_code in (200, 201)
    assert _queued() == set()  # the same text: nothing to embed
    assert put(agent_a_api, userId=U, key="city", value="Braga").status_code == 200
    assert _queued() == {internal_id(entry["id"])}
    call_command("embed", "--drain")
    assert EntryEmbedding.objects.get().text_hash == text_hash("city: Braga")


def test_a_text_changed_while_it_is_embedded_is_embedded_again(agent_a_api, put):
    entry = put(agent_a_api, userId=U, key="pet", value="a cat").json()
    claimed = queue_claim(queue=ENTRIES.queue, limit=10, lease_seconds=60, max_attempts=3)
    assert [c.id for c in claimed] == [internal_id(entry["id"])]
    held = queue_claim(queue=ENTRIES.queue, limit=10, lease_seconds=60, max_attempts=3)
    assert held == []  # held: no other consumer
    assert put(agent_a_api, userId=U, key="pet", value="two cats").status_code == 200  # while it embeds
    assert queue_done(queue=ENTRIES.queue, claimed=claimed) == 0  # queued again since: kept
    call_command("embed", "--drain")
    assert EntryEmbedding.objects.get().text_hash == text_hash("pet: two cats")
    assert _queued() == set()


def test_a_deleted_entry_leaves_the_queue(agent_a_api, put):
    entry = put(agent_a_api, userId=U, key="pet", value="a cat").json()
    assert agent_a_api.delete(f"/usermemorystore/memories/entry/{entry['id']}").status_code in (200, 204)
    assert _queued() == set()


def test_the_backlog_and_its_oldest_age_are_exported(agent_a_api, put):
    for key in ("a", "b", "c"):
        put(agent_a_api, userId=U, key=key, value=f"value {key}")
    PendingEntryVector.objects.update(queued_at=MemoryEntry.objects.first().updated_at.replace(year=2020))
    consumer.report_backlog()
    assert _sample("memory_embeddings_pending") == 3
    assert _sample("embedding_queue_oldest_seconds", kind=ENTRIES.name) > 3600
    call_command("embed", "--drain")
    consumer.report_backlog()
    assert _sample("memory_embeddings_pending") == 0
    assert _sample("embedding_queue_oldest_seconds", kind=ENTRIES.name) == 0


@override_settings(EMBEDDINGS_PROVIDER="none")
def test_without_an_embedder_the_consumer_takes_nothing(agent_a_api, put):
    put(agent_a_api, userId=U, key="a", value="x")
    assert consumer.drain().claimed == 0
    assert len(_queued()) == 1  # waiting for an embedder, as `embed --missing` would find it


def test_a_batch_answers_how_many_of_its_entries_wait_for_their_vectors(agent_a_api, settings):
    entries = [{"userId": U, "key": f"k{n}", "value": f"value {n}"} for n in range(3)]
    response = agent_a_api.put("/usermemorystore/memories/batch", entries, format="json")
    assert response.status_code == 200, response.content
    assert response.headers["X-Vectors-Pending"] == "3"
    call_command("embed", "--drain")
    response = agent_a_api.put("/usermemorystore/memories/batch", entries[:1], format="json")
    assert response.headers["X-Vectors-Pending"] == "0"  # unchanged: nothing new to embed


@pytest.mark.parametrize(("database_url", "inline"), [("", "48"), ("postgres://u@127.0.0.1:1/db", "0")])
def test_short_texts_are_embedded_in_their_request_by_default_only_on_the_embedded_database(
    database_url: str, inline: str
) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "EMBEDDINGS_INLINE_MAX_CHARS")}
    code = "from django.conf import settings; print(settings.EMBEDDINGS_INLINE_MAX_CHARS)"
    result = subprocess.run(  # noqa: S603 (our own interpreter, fixed arguments)
        [sys.executable, "-c", f"import django, os; django.setup(); {code}"],
        env=env | {"DATABASE_URL": database_url, "DJANGO_SETTINGS_MODULE": "config.settings"},
        capture_output=True,
        text=True,
        check=True,
        cwd=django_settings.BASE_DIR,
    )
    assert result.stdout.strip().splitlines()[-1] == inline
