"""At least once, on a real Celery worker and each broker: the worker is killed (SIGKILL, the whole worker,
as the OOM killer or a lost node would end it) while the receiver holds its request. The subscription did not
move past the event, and the next worker sends it again with the same id, which lets the receiver drop the
duplicate. On Redis the broker gives the unacknowledged delivery to the next worker (late acknowledgement,
a visibility timeout of 5 s here); kombu's PostgreSQL transport does not, and beat's sweep sends it, as this
test does."""

import signal
import time

import pytest
from django.db import connection
from memoryplatform_client import verify_webhook

from events.tasks import webhooks_deliver_due
from tests.events.receiver import Delivery, receiving
from tests.helpers import HANG_GUARD_SECONDS, Worker, celery_worker, publishing_to

pytestmark = pytest.mark.django_db(transaction=True)


def _wait_for_the_delivery_lock_to_go() -> None:
    """Until the killed worker's session, and the delivery lock it held, are gone (its server process notices
    the closed connection), a delivery finds the subscription busy. A hang guard only, no clock."""
    deadline = time.monotonic() + HANG_GUARD_SECONDS
    while True:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted"
                " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
            )
            (held,) = cursor.fetchone()
        if not held:
            return
        assert time.monotonic() < deadline, "the killed worker's lock is still held"
        time.sleep(0.1)


def test_a_worker_killed_mid_delivery_delivers_again_under_the_same_id(
    broker, tmp_path, agent_a, agent_a_api, subscribe, put, worker_env
):
    log = tmp_path / "worker.log"
    first = Worker(log, broker, **worker_env)

    def kill_the_worker(delivery: Delivery) -> None:
        if first.process.poll() is None:  # its request: the worker dies before it hears the answer
            first.kill()

    with receiving(on_delivery=kill_the_worker) as receiver, publishing_to(broker):
        subscription = subscribe(receiver.url, agent_a.id)
        put(agent_a_api, userId="u1", key="city", value="Porto")  # its commit nudges the delivery
        receiver.wait_for(1)
        assert first.process.returncode == -signal.SIGKILL
        _wait_for_the_delivery_lock_to_go()
        with celery_worker(log, broker, **worker_env):
            if broker.name != "redis":
                webhooks_deliver_due.apply_async()  # beat's sweep
            first_try, second_try = receiver.wait_for(2)[:2]

    assert first_try.headers["webhook-id"] == second_try.headers["webhook-id"]
    events = [
        verify_webhook(secret=subscription["secret"], body=d.body, headers=d.headers)
        for d in (first_try, second_try)
    ]
    assert events[0] == events[1] and events[0]["key"] == "city"
    handled = {e["id"]: e for e in events}  # the receiver's deduplication: by id
    assert len(handled) == 1
