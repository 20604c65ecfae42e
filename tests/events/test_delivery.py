"""Webhook deliveries to a real receiver on loopback: an event of each type, each signed; a receiver down,
then back; the subscription disabled after its last try and staff's "send again"; the timeout of a trickled
answer; the address check at delivery."""

from typing import Any

import pytest
from django.utils import timezone
from memoryplatform_client import verify_webhook

from dream.services import dream_run_cycle
from events.models import DeliveryAttempt, EventType, WebhookSubscription
from tests.events.conftest import BASE, deliver
from tests.events.receiver import receiving
from tests.extraction.conftest import fact, facts
from tests.helpers import internal_id
from usermemory.history import Actor, Scope
from usermemory.maintenance import Replacement, memory_flag_batch, memory_prune_batch, memory_supersede
from usermemory.models import MemoryEntry, MemoryEvent

pytestmark = pytest.mark.django_db(transaction=True)
U = "u1"


def _dream_changes(*entry_ids: int) -> None:
    """What Dream's passes write (usermemory.maintenance, their one door into the store): a prune, a flag and
    its settling, a summary that supersedes."""
    now = timezone.now()
    prune, flag, summarized = entry_ids
    memory_prune_batch(ids=[prune], actor_id="run:1", at=now)
    memory_flag_batch(ids=[flag], conflicted=True, actor_id="run:1", at=now)
    memory_flag_batch(ids=[flag], conflicted=False, actor_id="run:1", at=now)
    source = MemoryEntry.objects.get(pk=summarized)
    memory_supersede(
        user_id=U,
        scope=Scope.of(source),
        category="fact",
        replacements=[Replacement("summary", "summary-2", "a summary", [summarized], {})],
        sources_read={summarized: source.updated_at},
        actor=Actor(MemoryEvent.ActorType.DREAM, "run:1"),
        record_agents=False,
    )


def test_an_event_of_each_type_arrives_signed(
    agent_a, agent_a_api, admin_api, receiver, subscribe, put, openai_llm
):
    subscription = subscribe(receiver.url, agent_a.id)
    city = put(agent_a_api, userId=U, key="city", value="Porto")
    put(agent_a_api, userId=U, key="city", value="Lisbon")
    ids = [put(agent_a_api, userId=U, key=k, value=k)["id"] for k in ("old", "disputed", "long", "gone")]
    assert agent_a_api.delete(f"{BASE}/entry/{ids[3]}").status_code in (200, 204)
    _dream_changes(*(internal_id(i) for i in ids[:3]))
    openai_llm.answers = [facts(fact("diet", "vegetarian"))]
    chat = [{"role": "user", "content": "I am vegetarian.", "id": "m1"}]
    extracted = agent_a_api.post(f"{BASE}/{U}/extract", {"messages": chat}, format="json")
    assert extracted.status_code == 200, extracted.content
    dream_run_cycle(agent_id=agent_a.id)
    deliver()
    assert admin_api.delete(f"{BASE}/{U}").status_code == 200
    deliver()

    every = set(EventType.values)
    received = receiver.wait_for(len(every))
    events = [verify_webhook(secret=subscription["secret"], body=d.body, headers=d.headers) for d in received]
    assert {e["type"] for e in events} == every
    assert [d.headers["webhook-id"] for d in received] == [e["id"] for e in events]
    assert len({e["id"] for e in events}) == len(events)  # one id per event
    created = next(e for e in events if e["type"] == "memory.created")
    assert (created["key"], created["value"], created["entryId"]) == ("city", "Porto", city["id"])
    assert (created["sourceAgent"], created["visibility"]) == (agent_a.id, "self")
    erased = events[-1]
    assert erased["type"] == "user.erased" and set(erased) == {"id", "type", "occurredAt", "userId"}


def test_a_tampered_body_or_another_secret_does_not_verify(agent_a, agent_a_api, receiver, subscribe, put):
    from memoryplatform_client import WebhookVerificationError

    subscription = subscribe(receiver.url, agent_a.id)
    put(agent_a_api, userId=U, key="city", value="Porto")
    deliver()
    (delivery,) = receiver.wait_for(1)
    with pytest.raises(WebhookVerificationError):
        verify_webhook(secret=subscription["secret"], body=delivery.body + b" ", headers=delivery.headers)
    with pytest.raises(WebhookVerificationError):
        verify_webhook(secret="whsec_other", body=delivery.body, headers=delivery.headers)
    with pytest.raises(WebhookVerificationError):  # replayed an hour later
        verify_webhook(
            secret=subscription["secret"],
            body=delivery.body,
            headers=delivery.headers,
            now=int(delivery.headers["webhook-timestamp"]) + 3600,
        )


def _writes(client: Any, put: Any) -> list[tuple[str, str]]:
    """Six writes for two users, interleaved: (user, key) in the order they were made."""
    order = []
    for n in range(3):
        for user in ("u1", "u2"):
            put(client, userId=user, key=f"k{n}", value=f"{user}-{n}")
            order.append((user, f"k{n}"))
    return order


def test_a_receiver_down_then_back_gets_every_event_in_order(agent_a, agent_a_api, subscribe, put):
    with receiving() as receiver:
        subscription = subscribe(receiver.url, agent_a.id)
        port = receiver.port
    order = _writes(agent_a_api, put)
    deliver()  # refused: nobody listens
    deliver()  # and again
    stored = WebhookSubscription.objects.get(pk=subscription["id"])
    assert (stored.enabled, stored.failures, stored.delivered) == (True, 2, 0)
    assert DeliveryAttempt.objects.filter(subscription=stored, succeeded=False).count() == 2

    with receiving(port=port) as back:
        deliver()
        received = [(e["userId"], e["key"]) for e in (d.event for d in back.wait_for(len(order)))]
    assert received == order  # none lost, none twice, in the order written
    stored.refresh_from_db()
    assert (stored.failures, stored.delivered, stored.last_status) == (0, 6, 200)


def test_after_the_last_try_the_subscription_is_disabled_and_send_again_resumes(
    settings, agent_a, agent_a_api, subscribe, put, admin_client
):
    settings.WEBHOOK_MAX_ATTEMPTS = 2
    with receiving(status=503) as failing:
        subscription = subscribe(failing.url, agent_a.id)
        put(agent_a_api, userId=U, key="city", value="Porto")
        deliver()
        deliver()
        deliver()  # disabled: not tried again
        assert len(failing.wait_for(2)) == 2
        stored = WebhookSubscription.objects.get(pk=subscription["id"])
        assert (stored.enabled, stored.failures, stored.last_status) == (False, 2, 503)
        assert "2 failed tries" in stored.disabled_reason

        page = admin_client.get(f"/admin/events/webhooksubscription/{stored.pk}/change/")
        assert page.status_code == 200
        assert page.content.count(b"503") >= 2  # the last answer and each attempt

        failing.status = 200
        answer = admin_client.post(
            "/admin/events/webhooksubscription/",
            {"action": "send_again", "_selected_action": [str(stored.pk)]},
        )
        assert answer.status_code == 302
        deliver()
        assert [d.event["key"] for d in failing.wait_for(3)] == ["city"] * 3  # the same event, delivered
    stored.refresh_from_db()
    assert (stored.enabled, stored.failures, stored.delivered) == (True, 0, 1)


def test_a_trickled_answer_is_cut_at_the_timeout(settings, agent_a, agent_a_api, subscribe, put):
    settings.WEBHOOK_TIMEOUT = 1.0
    with receiving(trickle=True) as slow:
        subscription = subscribe(slow.url, agent_a.id)
        put(agent_a_api, userId=U, key="city", value="Porto")
        deliver()
        assert len(slow.wait_for(1)) == 1
    attempt = DeliveryAttempt.objects.get(subscription_id=subscription["id"])
    assert not attempt.succeeded and attempt.error == "No whole answer within 1 s."
    assert WebhookSubscription.objects.get(pk=subscription["id"]).failures == 1


def test_an_address_that_turned_private_is_refused_at_delivery(
    settings, agent_a, agent_a_api, subscribe, put
):
    with receiving() as receiver:
        subscription = subscribe(receiver.url, agent_a.id)  # allowed when it was made
        settings.WEBHOOK_ALLOW_PRIVATE = False  # as if its name now resolved to a private address
        put(agent_a_api, userId=U, key="city", value="Porto")
        deliver()
        assert receiver.deliveries == []
    attempt = DeliveryAttempt.objects.get(subscription_id=subscription["id"])
    assert attempt.status is None and "private or loopback" in attempt.error


def test_a_subscription_starts_at_its_creation(agent_a, agent_a_api, subscribe, put):
    put(agent_a_api, userId=U, key="before", value="x")
    with receiving() as receiver:
        subscribe(receiver.url, agent_a.id, eventTypes=["memory.updated"])
        put(agent_a_api, userId=U, key="after", value="x")
        put(agent_a_api, userId=U, key="after", value="y")
        deliver()
        (delivery,) = receiver.wait_for(1)
    assert (delivery.event["type"], delivery.event["key"], delivery.event["oldValue"]) == (
        "memory.updated",
        "after",
        "x",
    )


def test_a_redirect_is_not_followed(agent_a, agent_a_api, subscribe, put):
    with receiving() as elsewhere, receiving(status=307) as redirecting:
        redirecting.location = elsewhere.url
        subscription = subscribe(redirecting.url, agent_a.id)
        put(agent_a_api, userId=U, key="city", value="Porto")
        deliver()
        assert len(redirecting.wait_for(1)) == 1
        assert elsewhere.deliveries == []
    attempt = DeliveryAttempt.objects.get(subscription_id=subscription["id"])
    assert (attempt.succeeded, attempt.status) == (False, 307)


def test_a_long_answer_is_cut_and_the_delivery_counts(agent_a, agent_a_api, subscribe, put):
    with receiving(answer=b"x" * 5_000_000) as chatty:
        subscription = subscribe(chatty.url, agent_a.id)
        put(agent_a_api, userId=U, key="city", value="Porto")
        deliver()
        assert len(chatty.wait_for(1)) == 1
    attempt = DeliveryAttempt.objects.get(subscription_id=subscription["id"])
    assert attempt.succeeded and attempt.answer == "x" * 500
    stored = WebhookSubscription.objects.get(pk=subscription["id"])
    assert (stored.delivered, stored.last_answer) == (1, "x" * 500)
