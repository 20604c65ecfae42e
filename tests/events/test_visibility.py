"""A subscription and the feed see what their agent may read, by the rules of every read door: never another
agent's ``self`` entry, nor a group the agent is not in."""

from collections.abc import Callable
from typing import Any

import pytest

from events.models import WebhookSubscription
from tests.events.conftest import deliver, settled
from tests.events.receiver import receiving
from tests.factories import AgentFactory, AgentGroupFactory

pytestmark = pytest.mark.django_db(transaction=True)
U = "u1"
SEEN_BY_A = ["b-global", "c-team", "a-self"]
SEEN_BY_B = ["b-self", "b-bteam", "b-global"]


@pytest.fixture
def write_every_scope(agent_a, agent_b, agent_a_api, agent_b_api, make_api_client, put) -> Callable[[], None]:
    """Entries of every scope, written when called: ``team`` holds agents a and c, ``bteam`` agent b alone."""
    teammate = AgentFactory(id="agent-c")
    AgentGroupFactory(id="team", members=[agent_a, teammate])
    AgentGroupFactory(id="bteam", members=[agent_b])
    c_api = make_api_client("agent", teammate)

    def _write() -> None:
        put(agent_b_api, userId=U, key="b-self", value="b's secret")
        put(agent_b_api, userId=U, key="b-bteam", value="bteam only", visibility="group", groupIds=["bteam"])
        put(agent_b_api, userId=U, key="b-global", value="for all", visibility="global")
        put(c_api, userId=U, key="c-team", value="for the team", visibility="group", groupIds=["team"])
        put(agent_a_api, userId=U, key="a-self", value="a's own")

    return _write


def test_a_subscription_gets_only_what_its_agent_may_read(agent_a, agent_b, subscribe, write_every_scope):
    with receiving() as for_a, receiving() as for_b:
        subscribe(for_a.url, agent_a.id)
        subscribe(for_b.url, agent_b.id)
        write_every_scope()
        deliver()
        a_keys = [d.event["key"] for d in for_a.wait_for(len(SEEN_BY_A))]
        b_keys = [d.event["key"] for d in for_b.wait_for(len(SEEN_BY_B))]
    assert a_keys == SEEN_BY_A
    assert b_keys == SEEN_BY_B


def _feed(client: Any) -> list[dict[str, Any]]:
    settled()
    response = client.get("/v1/events")
    assert response.status_code == 200, response.content
    return response.json()["results"]


def test_the_feed_shows_each_key_what_it_may_read(agent_a_api, agent_b_api, viewer_api, write_every_scope):
    write_every_scope()
    assert [e["key"] for e in _feed(agent_a_api)] == SEEN_BY_A
    assert [e["key"] for e in _feed(agent_b_api)] == SEEN_BY_B
    everything = _feed(viewer_api)
    assert len(everything) == 5 and everything[0]["value"] == "b's secret"  # a viewer reads every value


def test_a_subscription_moves_past_the_events_its_agent_may_not_read(
    agent_a, agent_a_api, agent_b_api, subscribe, put
):
    """A delivery run that finds only events its agent may not read moves the subscription past them, so the
    next run does not scan them again; what the agent may read later still arrives."""
    with receiving() as for_a:
        subscription = subscribe(for_a.url, agent_a.id)
        stored = WebhookSubscription.objects.get(pk=subscription["id"])
        start = (stored.cursor_txid, stored.cursor_id)
        for n in range(3):
            put(agent_b_api, userId=U, key=f"b{n}", value=n)
        deliver()
        stored.refresh_from_db()
        assert (stored.cursor_txid, stored.cursor_id) > start and stored.delivered == 0
        put(agent_a_api, userId=U, key="a-self", value="a's own")
        deliver()
        assert [d.event["key"] for d in for_a.wait_for(1)] == ["a-self"]
