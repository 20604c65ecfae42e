"""The events' retention: beat's ``events-prune`` deletes the events older than EVENTS_RETENTION_DAYS, their
delivery attempts with them, in short batches; the feed then starts at the oldest event kept, a cursor from
before the deleted events is refused (410 ``cursor_expired``) rather than read on past them, a subscription
behind them is disabled saying so (and goes on past them when enabled again), and 0 keeps every event."""

from datetime import timedelta

import pytest
from django.utils import timezone

from events import services
from events.models import DeliveryAttempt, Event
from events.tasks import events_prune
from tests.events.conftest import deliver, settled
from tests.events.receiver import receiving
from tests.helpers import assert_envelope

pytestmark = pytest.mark.django_db(transaction=True)


def _feed(api) -> list[tuple[str, str]]:  # type: ignore[no-untyped-def]
    settled()
    response = api.get("/v1/events")
    assert response.status_code == 200, response.content
    return [(e["userId"], e["type"]) for e in response.json()["results"]]


def _age(user_id: str, days: int) -> None:
    Event.objects.filter(user_id=user_id).update(occurred_at=timezone.now() - timedelta(days=days))


def test_events_past_the_retention_go_with_their_attempts_and_the_rest_stay(
    agent_a, agent_a_api, viewer_api, subscribe, put, settings, monkeypatch
):
    settings.EVENTS_RETENTION_DAYS = 30
    monkeypatch.setattr(services, "PRUNE_BATCH", 2)  # several batches
    with receiving() as receiver:
        subscribe(receiver.url, agent_a.id)
        for user in ("old-1", "old-2", "old-3", "edge", "new"):
            put(agent_a_api, userId=user, key="city", value=f"{user}'s city")
        deliver()
        receiver.wait_for(5)
    assert DeliveryAttempt.objects.count() == 5
    for user in ("old-1", "old-2", "old-3"):
        _age(user, 31)
    _age("edge", 29)

    assert events_prune() == 3
    assert _feed(viewer_api) == [(user, "memory.created") for user in ("edge", "new")]
    assert set(DeliveryAttempt.objects.values_list("event__user_id", flat=True)) == {"edge", "new"}
    assert events_prune() == 0  # a second run finds nothing more


def test_a_retention_of_0_keeps_every_event(agent_a_api, viewer_api, put, settings):
    settings.EVENTS_RETENTION_DAYS = 0
    put(agent_a_api, userId="ancient", key="city", value="Ur")
    _age("ancient", 10_000)
    assert events_prune() == 0
    assert _feed(viewer_api) == [("ancient", "memory.created")]


def _page(api, after: str) -> tuple[list[str], str]:  # type: ignore[no-untyped-def]
    settled()
    response = api.get("/v1/events", {"after": after})
    assert response.status_code == 200, response.content
    return [e["userId"] for e in response.json()["results"]], response.json()["next"]


@pytest.mark.parametrize("reader", ["viewer_api", "agent_a_api"])
def test_a_cursor_from_before_deleted_events_is_refused_and_one_past_them_reads_on(
    request, reader, agent_a_api, put, settings
):
    settings.EVENTS_RETENTION_DAYS = 30
    api = request.getfixturevalue(reader)
    put(agent_a_api, userId="kept-early", key="city", value="Ur")
    _, behind = _page(api, "0")  # a reader that stopped here
    for user in ("old-1", "old-2"):
        put(agent_a_api, userId=user, key="city", value=f"{user}'s city")
    _, caught_up = _page(api, behind)  # a reader that read on
    put(agent_a_api, userId="new", key="city", value="Lisbon")
    for user in ("old-1", "old-2"):
        _age(user, 31)

    assert events_prune() == 2
    refused = assert_envelope(api.get("/v1/events", {"after": behind}), 410, "cursor_expired")
    assert refused["details"] == {"field": "after"}
    assert _page(api, caught_up)[0] == ["new"]  # it missed nothing: it reads on
    assert _page(api, "0")[0] == ["kept-early", "new"]  # starting again: the oldest event kept on


def test_a_cursor_older_than_the_retention_is_read_on_when_nothing_after_it_was_deleted(
    agent_a_api, viewer_api, put, settings
):
    """A reader idle past the retention loses nothing when the deleted events all came before its cursor."""
    settings.EVENTS_RETENTION_DAYS = 30
    put(agent_a_api, userId="old", key="city", value="Ur")
    _, cursor = _page(viewer_api, "0")
    put(agent_a_api, userId="new", key="city", value="Lisbon")
    _age("old", 31)

    assert events_prune() == 1
    assert _page(viewer_api, cursor)[0] == ["new"]


@pytest.mark.parametrize("enable", ["rest", "admin_send_again"])
def test_a_subscription_behind_deleted_events_is_disabled_saying_so_and_goes_on_past_them(
    enable, agent_a, agent_a_api, admin_api, admin_client, subscribe, put, settings
):
    settings.EVENTS_RETENTION_DAYS = 30
    with receiving() as receiver:
        hook = subscribe(receiver.url, agent_a.id)
        put(agent_a_api, userId="kept", key="city", value="Ur")
        deliver()
        receiver.wait_for(1)
        for user in ("old-1", "old-2"):  # written while no delivery ran, then past the retention
            put(agent_a_api, userId=user, key="city", value=f"{user}'s city")
            _age(user, 31)
        assert events_prune() == 2
        put(agent_a_api, userId="new", key="city", value="Lisbon")

        deliver()  # behind the deleted events: disabled, nothing sent
        shown = admin_api.get(f"/v1/webhooks/{hook['id']}").json()
        assert shown["enabled"] is False
        assert "deleted by the retention" in shown["disabledReason"]
        if enable == "rest":
            changed = admin_api.patch(f"/v1/webhooks/{hook['id']}", {"enabled": True}, format="json")
            assert changed.status_code == 200, changed.content
        else:
            answer = admin_client.post(
                "/admin/events/webhooksubscription/",
                {"action": "send_again", "_selected_action": [hook["id"]]},
            )
            assert answer.status_code == 302
        deliver()
        assert [d.event["userId"] for d in receiver.wait_for(2)] == ["kept", "new"]
    assert admin_api.get(f"/v1/webhooks/{hook['id']}").json()["enabled"] is True


def test_a_subscription_disabled_past_the_retention_is_told_when_enabled_again(
    agent_a, agent_a_api, admin_api, subscribe, put, settings
):
    """Enabled again by staff who disabled it, it does not skip the gap unsaid: its first delivery disables it
    with the reason; enabled after that, it goes on past the deleted events."""
    settings.EVENTS_RETENTION_DAYS = 30
    with receiving() as receiver:
        hook = subscribe(receiver.url, agent_a.id)
        url = f"/v1/webhooks/{hook['id']}"
        assert admin_api.patch(url, {"enabled": False}, format="json").status_code == 200
        put(agent_a_api, userId="old", key="city", value="Ur")
        _age("old", 31)
        assert events_prune() == 1
        put(agent_a_api, userId="new", key="city", value="Lisbon")

        assert admin_api.patch(url, {"enabled": True}, format="json").status_code == 200
        deliver()
        shown = admin_api.get(url).json()
        assert shown["enabled"] is False and "deleted by the retention" in shown["disabledReason"]
        assert receiver.events() == []

        assert admin_api.patch(url, {"enabled": True}, format="json").status_code == 200
        deliver()
        assert [d.event["userId"] for d in receiver.wait_for(1)] == ["new"]
