"""Issue 16, memory-service's contract: sessionId is optional, an agent key's messages always carry the agent
(seed 000), and GET /v1/conversations lists what the caller may see, newest first, in pages."""

import uuid

import pytest

from conversations.models import Conversation, Message
from tests.conversations.utils import BASE, create, listing, say, sync, text, texts
from tests.helpers import assert_envelope

# --- sessionId ----------------------------------------------------------------------------------------------


def test_session_id_is_optional_on_every_write_and_stored_when_given(agent_a_api):
    conversation = create(agent_a_api)
    url = f"{BASE}/{conversation}/messages"
    without = agent_a_api.post(url, {"role": "user", "content": text("a")}, format="json")
    assert without.status_code == 201, without.content
    assert without.json()["sessionId"] is None
    assert say(agent_a_api, conversation, "b", sessionId="s-7")["sessionId"] == "s-7"
    batch = agent_a_api.post(url, {"messages": [{"role": "user", "content": text("c")}]}, format="json")
    assert batch.status_code == 201, batch.content
    assert batch.json()["data"][0]["sessionId"] is None
    synced = agent_a_api.post(
        f"{BASE}/{conversation}/memory/messages/sync",
        {"messages": [{"role": "user", "content": text("m")}]},
        format="json",
    )
    assert synced.status_code == 200, synced.content
    assert synced.json()["messages"][0]["sessionId"] is None
    stored = list(Message.objects.order_by("position").values_list("session_id", flat=True))
    assert stored == [None, "s-7", None, None]
    assert_envelope(sync(agent_a_api, conversation, "m2", session_id=" "), 400, "bad_request")


# --- Attribution --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("channel", "role"),
    [
        ("history", "user"),
        ("history", "assistant"),
        ("history", "system"),
        ("history", "tool"),
        ("summary", "user"),
        ("summary", "assistant"),
        ("summary", "system"),
        ("memory", "user"),
    ],
)
def test_an_agent_keys_message_always_carries_the_agent(agent_a_api, channel, role):
    conversation = create(agent_a_api)
    assert say(agent_a_api, conversation, "x", channel=channel, role=role)["agentId"] == "agent-a"
    assert Message.objects.get().agent_id == "agent-a"


def test_other_agents_see_a_relayed_user_message_with_its_author(agent_a_api, agent_b_api, admin_api):
    """The /context of another agent shows who wrote it, on the history channel and on the case log."""
    conversation = create(agent_a_api)
    say(agent_a_api, conversation, "relayed by a", role="user")
    say(agent_a_api, conversation, "a's reply", role="assistant")
    say(agent_a_api, conversation, "noted by a", channel="summary", role="user")
    say(admin_api, conversation, "typed by an operator", role="user")
    context = agent_b_api.get(f"{BASE}/{conversation}/context")
    assert context.status_code == 200, context.content
    history = context.json()["history"]
    assert [(m["role"], m["agentId"]) for m in history] == [("user", "agent-a"), ("user", None)]
    case_log = context.json()["caseLog"]["data"]
    assert [(m["role"], m["agentId"]) for m in case_log] == [("user", "agent-a")]
    # Seed 004: B's isolated view still holds every user message, and none of A's replies.
    view = listing(agent_b_api, conversation, channel="history", view="agent")["data"]
    assert texts(view) == ["relayed by a", "typed by an operator"]


# --- Listing ------------------------------------------------------------------------------------------------


def _page(client, **params):  # type: ignore[no-untyped-def]
    response = client.get(BASE, params)
    assert response.status_code == 200, response.content
    return response.json()


def test_listing_pages_newest_first_with_the_visibility_of_get(
    agent_a_api, agent_b_api, viewer_api, admin_api, django_assert_max_num_queries
):
    open_ids = [create(agent_a_api, "u1") for _ in range(3)]
    gated = create(agent_a_api, "u1", groupId="team")  # agent-a is in "team", agent-b is not
    other_user = create(agent_b_api, "u2")

    first = _page(agent_a_api, userId="u1", limit=2)
    assert [c["id"] for c in first["data"]] == [gated, open_ids[2]]
    assert first["nextCursor"] == open_ids[2]
    with django_assert_max_num_queries(3):  # the key (unless cached), the cursor, the page
        second = _page(agent_a_api, userId="u1", limit=2, after=first["nextCursor"])
    assert [c["id"] for c in second["data"]] == [open_ids[1], open_ids[0]]
    assert second["nextCursor"] is None

    with django_assert_max_num_queries(2):  # the key (unless cached), the page
        b_sees = _page(agent_b_api)
    assert [c["id"] for c in b_sees["data"]] == [other_user, *reversed(open_ids)]
    assert gated not in {c["id"] for c in _page(agent_b_api, userId="u1")["data"]}
    assert_envelope(agent_b_api.get(f"{BASE}/{gated}"), 404, "not_found")  # issue 33: was 403
    for client in (viewer_api, admin_api):
        assert len(_page(client)["data"]) == 5
    assert _page(admin_api, userId="nobody") == {"data": [], "nextCursor": None}


def test_listing_refuses_bad_input(agent_a_api, agent_b_api, anon_api):
    gated = create(agent_a_api, "u1", groupId="team")
    for params in (
        {"limit": 0},
        {"limit": 201},
        {"limit": "x"},
        {"after": "not-a-uuid"},
        {"after": uuid.uuid4()},
    ):
        assert_envelope(agent_a_api.get(BASE, params), 400, "bad_request")
    # A conversation the caller may not see is no cursor for it.
    assert_envelope(agent_b_api.get(BASE, {"after": gated}), 400, "bad_request")
    assert_envelope(anon_api.get(BASE), 401, "unauthorized")
    assert Conversation.objects.count() == 1
