"""Deliveries on a real Celery worker, on each broker, with nothing else sending a task (no beat, no
command): an upsert through REST reaches the receiver because its commit nudged the deliveries; staff's
"send again" in the admin enqueues the subscription's delivery as it commits."""

import pytest
from memoryplatform_client import verify_webhook

from events.models import WebhookSubscription
from tests.helpers import celery_worker, publishing_to

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_upsert_through_rest_reaches_the_receiver_through_a_worker(
    broker, tmp_path, agent_a, agent_a_api, receiver, subscribe, put, worker_env
):
    subscription = subscribe(receiver.url, agent_a.id)
    with celery_worker(tmp_path / "worker.log", broker, **worker_env) as worker, publishing_to(broker):
        put(agent_a_api, userId="u1", key="city", value="Porto")
        (delivery,) = receiver.wait_for(1)
        worker.wait_for("Task webhooks.deliver[")
    event = verify_webhook(secret=subscription["secret"], body=delivery.body, headers=delivery.headers)
    (listed,) = agent_a_api.get("/v1/events").json()["results"]  # the same event, as the feed shows it
    assert event == listed and (event["type"], event["value"]) == ("memory.created", "Porto")


def test_send_again_in_the_admin_is_delivered_by_a_worker(
    broker, tmp_path, agent_a, agent_a_api, admin_api, admin_client, receiver, subscribe, put, worker_env
):
    subscription = subscribe(receiver.url, agent_a.id)
    response = admin_api.patch(f"/v1/webhooks/{subscription['id']}", {"enabled": False}, format="json")
    assert response.status_code == 200, response.content
    with celery_worker(tmp_path / "worker.log", broker, **worker_env) as worker, publishing_to(broker):
        put(agent_a_api, userId="u1", key="city", value="Porto")
        worker.wait_for("Task webhooks.deliver_due[", count=2)  # the write's nudge: received, and done
        assert receiver.deliveries == []  # disabled: the sweep passed it by

        answer = admin_client.post(
            "/admin/events/webhooksubscription/",
            {"action": "send_again", "_selected_action": [subscription["id"]]},
        )
        assert answer.status_code == 302
        (delivery,) = receiver.wait_for(1)
        worker.wait_for("Task webhooks.deliver[", count=2)  # received, and done: the position moved
    assert delivery.event["key"] == "city"
    stored = WebhookSubscription.objects.get(pk=subscription["id"])
    assert (stored.enabled, stored.delivered) == (True, 1)
