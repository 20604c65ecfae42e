"""A write's vector from a real Celery worker, on each broker: the write's trigger queues the text in its own
transaction, its commit enqueues ``vectors.drain`` (the nudge), and a worker embeds it with the real local
model. Nothing else sends the task here (no beat): the nudge alone brings the vector."""

import logging
import time

import pytest

from tests.helpers import Broker, broker_that_hangs_up, celery_worker, internal_id, publishing_to
from usermemory.models import EntryEmbedding, PendingEntryVector

pytestmark = pytest.mark.django_db(transaction=True)

LONG = "the user spends every summer walking the coast path from Porto to Santiago, " * 2


def test_a_write_through_rest_gets_its_vector_from_a_worker(broker, agent_a_api, put, tmp_path):
    with celery_worker(tmp_path / "worker.log", broker) as worker, publishing_to(broker):
        response = put(agent_a_api, userId="u-nudge", key="summer", value=LONG)  # too long to embed inline
        assert response.status_code == 201, response.content
        entry = internal_id(response.json()["id"])
        deadline = time.monotonic() + 120
        while not EntryEmbedding.objects.filter(entry_id=entry).exists():
            assert worker.process.poll() is None, worker.log.read_text()[-3000:]
            assert time.monotonic() < deadline, f"no vector in 120 s:\n{worker.log.read_text()[-3000:]}"
            time.sleep(0.1)
        worker.wait_for("Task vectors.drain[")
    assert not PendingEntryVector.objects.filter(entry_id=entry).exists()  # taken off the queue


def test_a_write_with_no_broker_to_take_its_nudge_still_commits(agent_a_api, put, caplog):
    """A broker that does not answer loses the nudge, never the write: the text stays queued for the sweep.
    A nudge tries the broker once (through kombu's pooled producer it connected three times, over 6 s), and
    after a failed try the process sends that broker no nudge for a while: the next write tries nothing."""
    caplog.set_level(logging.WARNING, logger="memoryplatform.nudge")
    with broker_that_hangs_up() as (url, taken), publishing_to(Broker("redis", url, {})):
        first = put(agent_a_api, userId="u-nudge", key="summer", value=LONG)
        tries = len(taken)
        second = put(agent_a_api, userId="u-nudge", key="winter", value=LONG)
    failed = [record for record in caplog.records if record.getMessage().startswith("Could not enqueue")]
    assert tries >= 1 and len(failed) == tries  # one connection a nudge, each one logged
    assert len(taken) == tries  # the second write sent no nudge to the broker that failed
    for response in (first, second):
        assert response.status_code == 201, response.content
        assert PendingEntryVector.objects.filter(entry_id=internal_id(response.json()["id"])).exists()
