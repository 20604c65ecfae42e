"""At least once: a delivery process killed while the receiver holds its request sends that event again, and
the event's id lets the receiver drop the duplicate."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from memoryplatform_client import verify_webhook

from tests.events.receiver import Delivery, receiving
from tests.helpers import url_of_the_test_database

pytestmark = pytest.mark.django_db(transaction=True)
ROOT = Path(__file__).resolve().parents[2]


def _deliverer(log: Path) -> subprocess.Popen[bytes]:
    """``manage.py deliver_webhooks`` on the test database, in a process of its own."""
    env = os.environ | {
        "DATABASE_URL": url_of_the_test_database(),
        "SECRET_KEY": settings.SECRET_KEY,  # the same public ids as this process
        "PUBLIC_ID_KEY": settings.PUBLIC_ID_KEY,
        "WEBHOOK_ALLOW_PRIVATE": "true",
    }
    with log.open("a") as out:
        return subprocess.Popen(  # noqa: S603
            [sys.executable, "manage.py", "deliver_webhooks"], cwd=ROOT, env=env, stdout=out, stderr=out
        )


def test_a_worker_killed_mid_delivery_delivers_again_under_the_same_id(
    tmp_path, agent_a, agent_a_api, subscribe, put
):
    processes: list[subprocess.Popen[bytes]] = []

    def kill_the_first(delivery: Delivery) -> None:
        if len(processes) == 1:  # the first process's request: it dies before it hears the answer
            processes[0].send_signal(signal.SIGKILL)
            processes[0].wait()

    with receiving(on_delivery=kill_the_first) as receiver:
        subscription = subscribe(receiver.url, agent_a.id)
        put(agent_a_api, userId="u1", key="city", value="Porto")
        processes.append(_deliverer(tmp_path / "deliver.log"))
        receiver.wait_for(1)
        assert processes[0].returncode == -signal.SIGKILL
        while len(receiver.deliveries) < 2:  # its lock goes with its connection: a later run delivers
            processes.append(_deliverer(tmp_path / "deliver.log"))
            assert processes[-1].wait(timeout=120) == 0, (tmp_path / "deliver.log").read_text()
        first, second = receiver.wait_for(2)[:2]

    assert first.headers["webhook-id"] == second.headers["webhook-id"]
    events = [
        verify_webhook(secret=subscription["secret"], body=d.body, headers=d.headers) for d in (first, second)
    ]
    assert events[0] == events[1] and events[0]["key"] == "city"
    handled = {e["id"]: e for e in events}  # the receiver's deduplication: by id
    assert len(handled) == 1
