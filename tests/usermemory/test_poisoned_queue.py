"""A text that kills the process embedding it (issue 44, finding 1): the next worker is not killed too, and
the text is parked with why, on each broker.

The consumers here are real Celery workers (the ``vectors.drain`` task) on the test database, with a scripted
embedding server that never answers a request holding the poisoned text: the test kills the whole worker
while it waits on that answer, as an abort in native code would, at the moment the server says the text
arrived (its own signal, not a clock).
"""

import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.test import override_settings

from memoryplatform.embeddings import get_embedder
from memoryplatform.tasks import vectors_drain
from tests.embedding_server import Script, embedding_server
from tests.helpers import Broker, Worker, celery_worker, internal_id, publishing_to
from usermemory.models import EntryEmbedding, PendingEntryVector

U = "user-poison"
POISON = "POISON"
ROOT = Path(django_settings.BASE_DIR)
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def script() -> Iterator[Script]:
    """The scripted embedder, for this process (so no text is embedded in its request) and its children."""
    script = Script(vectors=defaultdict(lambda: [0.6, 0.8, 0.0]), hang_on=POISON)
    with embedding_server(script):
        get_embedder.cache_clear()
        try:
            remote = {
                "EMBEDDINGS_PROVIDER": "openai",
                "EMBEDDINGS_MODEL": "tiny",
                "EMBEDDINGS_URL": script.url,
            }
            with override_settings(**remote):
                yield script
        finally:
            get_embedder.cache_clear()


def _env(script: Script) -> dict[str, str]:
    return {
        "EMBEDDINGS_PROVIDER": "openai",
        "EMBEDDINGS_MODEL": "tiny",
        "EMBEDDINGS_URL": script.url,
        "EMBEDDINGS_TIMEOUT": "600",  # the poisoned request never ends: only the process's death does
        "EMBEDDINGS_LEASE_SECONDS": "1",
        "EMBEDDINGS_MAX_ATTEMPTS": "2",
        "CELERY_WORKER_CONCURRENCY": "1",
    }


def _kill_when_it_embeds_the_poison(script: Script, worker: Worker) -> None:
    deadline = time.monotonic() + 90
    while not script.hung.is_set():
        assert time.monotonic() < deadline, f"no poisoned request in 90 s:\n{worker.log.read_text()[-3000:]}"
        time.sleep(0.1)
    worker.kill()  # the whole worker, as an abort in native code, the OOM killer or a lost node would end it
    script.hung.clear()


def _drain_or_redeliver(broker: Broker, *, first: bool) -> None:
    """The first worker gets the drain a write's nudge would send. After a worker was killed: on Redis the
    broker gives its unacknowledged message to the next worker (the visibility timeout, 5 s here); kombu's
    PostgreSQL transport does not, and beat's sweep (the same task, every EMBEDDINGS_SWEEP_INTERVAL) sends
    it, as this test does."""
    if first or broker.name != "redis":
        with publishing_to(broker):
            vectors_drain.apply_async()


def test_a_text_that_kills_its_workers_is_parked_and_the_others_get_their_vectors(
    broker, agent_a_api, put, script, tmp_path
):
    ids = [internal_id(put(agent_a_api, userId=U, key="poisoned", value=f"{POISON} text").json()["id"])]
    for key in ("city", "drink", "pet"):
        response = put(agent_a_api, userId=U, key=key, value=f"the {key} of the user")
        assert response.status_code == 201, response.content
        ids.append(internal_id(response.json()["id"]))
    poisoned, others = ids[0], ids[1:]
    env, log = _env(script), tmp_path / "worker.log"

    # Two workers die on it: the first with its whole batch claimed, the second with the text alone (the
    # oldest suspect), its batch-mates still waiting.
    for attempt in range(2):
        worker = Worker(log, broker, **env)
        _drain_or_redeliver(broker, first=attempt == 0)
        _kill_when_it_embeds_the_poison(script, worker)
    assert PendingEntryVector.objects.get(entry_id=poisoned).attempts == 2
    assert [len(r["input"]) for r in script.requests] == [4, 1]

    # The third parks it, embeds the others one by one (suspects too), and lives on.
    with celery_worker(log, broker, **env) as third:
        _drain_or_redeliver(broker, first=False)
        deadline = time.monotonic() + 90
        while not (
            PendingEntryVector.objects.filter(parked_at__isnull=False).exists()
            and EntryEmbedding.objects.count() == len(others)
        ):
            assert third.process.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, f"no parking in 90 s:\n{log.read_text()[-3000:]}"
            time.sleep(0.1)
    row = PendingEntryVector.objects.get(entry_id=poisoned)
    assert row.parked_at is not None and "Claimed 2 times and never answered" in row.last_error
    assert f"Parked 1 queued {PendingEntryVector._meta.db_table}" in log.read_text()
    assert set(EntryEmbedding.objects.values_list("entry_id", flat=True)) == set(others)
    assert [len(r["input"]) for r in script.requests] == [4, 1, 1, 1, 1]

    # Written anew, the text is a new try: out of the parking, its claims forgotten.
    assert put(agent_a_api, userId=U, key="poisoned", value="a harmless text").status_code == 200
    row = PendingEntryVector.objects.get(entry_id=poisoned)
    assert (row.attempts, row.parked_at, row.last_error) == (0, None, "")
