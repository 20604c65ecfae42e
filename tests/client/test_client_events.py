"""The change feed through both Python clients over real HTTP: pages that follow each other, a type filter,
what an agent may read; verify_webhook against a real delivery's signature."""

import asyncio

import pytest
from django.core.management import call_command
from memoryplatform_client import BadRequestError, WebhookVerificationError, verify_webhook

from tests.events.receiver import receiving

pytestmark = pytest.mark.django_db(transaction=True)
U = "events-user"


def test_list_events_pages_and_filters(client_for, async_client_for, support):
    nova, aniza, outsider = support
    mp = client_for(nova)
    for n in range(3):
        mp.upsert_memory(U, f"k{n}", n, visibility="global")
    mp.upsert_memory(U, "k0", "changed", visibility="global")
    client_for(aniza).upsert_memory(U, "aniza-only", "private")

    first = mp.list_events(limit=2)
    rest = mp.list_events(after=first["next"])
    assert [e["key"] for e in first["results"] + rest["results"]] == ["k0", "k1", "k2", "k0"]  # not aniza's
    assert mp.list_events(after=rest["next"]) == {"results": [], "next": rest["next"]}
    (update,) = mp.list_events(types=["memory.updated"])["results"]
    assert (update["value"], update["oldValue"]) == ("changed", 0)
    with pytest.raises(BadRequestError):
        mp.list_events(after="not-a-cursor")

    async_client = async_client_for(nova)  # its key made here, outside the event loop

    async def read_async() -> list[str]:
        async with async_client as client:
            page = await client.list_events(types=["memory.created"])
            return [e["key"] for e in page["results"]]

    assert asyncio.run(read_async()) == ["k0", "k1", "k2"]


def test_verify_webhook_checks_a_real_delivery(settings, admin_api, client_for, support):
    settings.WEBHOOK_ALLOW_PRIVATE = True
    nova, _, _ = support
    with receiving() as receiver:
        answer = admin_api.post("/v1/webhooks", {"url": receiver.url, "agentId": nova.id}, format="json")
        assert answer.status_code == 201, answer.content
        created = answer.json()
        client_for(nova).upsert_memory(U, "city", "Lisbon")
        call_command("deliver_webhooks")
        (delivery,) = receiver.wait_for(1)
    event = verify_webhook(secret=created["secret"], body=delivery.body, headers=delivery.headers)
    assert (event["type"], event["key"], event["value"]) == ("memory.created", "city", "Lisbon")
    with pytest.raises(WebhookVerificationError):
        tampered = delivery.body.replace(b"Lisbon", b"Paris")
        verify_webhook(secret=created["secret"], body=tampered, headers=delivery.headers)
