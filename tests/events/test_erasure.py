"""GDPR: erasing a user removes the user's events with their values; subscribers and the feed then hold one
``user.erased`` event naming only the user id; another user's events stay."""

import jsonschema
import pytest

from events.models import Event
from tests.events.conftest import BASE, deliver
from tests.events.receiver import receiving

pytestmark = pytest.mark.django_db(transaction=True)


def test_erasure_leaves_one_event_naming_only_the_user(
    agent_a, agent_a_api, admin_api, viewer_api, subscribe, put
):
    with receiving() as receiver:
        subscribe(receiver.url, agent_a.id)
        put(agent_a_api, userId="gone", key="diagnosis", value="something private")
        put(agent_a_api, userId="kept", key="city", value="Lisbon")
        erased = admin_api.delete(f"{BASE}/gone")
        assert erased.status_code == 200, erased.content
        assert erased.json()["events"] == {"eventsDeleted": 1}
        deliver()
        received = [d.event for d in receiver.wait_for(2)]

    assert [(e["type"], e["userId"]) for e in received] == [
        ("memory.created", "kept"),
        ("user.erased", "gone"),
    ]
    assert set(received[1]) == {"id", "type", "occurredAt", "userId"}
    assert b"something private" not in b"".join(d.body for d in receiver.deliveries)
    feed = viewer_api.get("/v1/events").json()["results"]
    assert [(e["type"], e["userId"]) for e in feed] == [("memory.created", "kept"), ("user.erased", "gone")]
    assert list(Event.objects.filter(user_id="gone").values_list("type", "value", "old_value")) == [
        ("user.erased", None, None)
    ]


def test_the_erasure_report_is_the_one_the_schema_documents(client, agent_a_api, admin_api, put):
    """The answer of an erasure validates against the published schema's 200 answer, which names the events'
    part."""
    put(agent_a_api, userId="gone", key="city", value="Porto")
    erased = admin_api.delete(f"{BASE}/gone")
    assert erased.status_code == 200, erased.content

    schema = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    answer = schema["paths"]["/usermemorystore/memories/{user_id}"]["delete"]["responses"]["200"]
    documented = answer["content"]["application/json"]["schema"]
    jsonschema.validate(erased.json(), {**documented, "components": schema["components"]})
    report = schema["components"]["schemas"]["EraseOutput"]
    assert "events" in report["required"] and erased.json()["events"] == {"eventsDeleted": 1}
