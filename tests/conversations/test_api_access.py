"""Who may do what: group gating, viewer and admin keys, and bad input in the error envelope."""

import uuid

import pytest

from conversations.models import Conversation, Message
from tests.conversations.utils import BASE, create, listing, post, say, text
from tests.helpers import assert_envelope


def test_create_and_get(agent_a_api, viewer_api):
    response = agent_a_api.post(
        BASE, {"userId": "user-1", "title": "Refund", "groupId": "team"}, format="json"
    )
    assert response.status_code == 201, response.content
    created = response.json()
    assert set(created) == {"id", "userId", "groupId", "title", "createdAt"}
    assert (created["userId"], created["groupId"], created["title"]) == ("user-1", "team", "Refund")
    assert viewer_api.get(f"{BASE}/{created['id']}").json() == created


def test_group_gates_participation(agent_a_api, agent_b_api):
    assert_envelope(
        agent_b_api.post(BASE, {"userId": "u", "groupId": "team"}, format="json"), 403, "forbidden"
    )
    assert_envelope(
        agent_b_api.post(BASE, {"userId": "u", "groupId": "nope"}, format="json"), 403, "forbidden"
    )
    gated = create(agent_a_api, groupId="team")
    say(agent_a_api, gated, "hello team")

    for response in [
        agent_b_api.get(f"{BASE}/{gated}"),
        agent_b_api.get(f"{BASE}/{gated}/messages"),
        post(agent_b_api, gated, content="let me in"),
        agent_b_api.post(
            f"{BASE}/{gated}/memory/messages/sync",
            {"sessionId": "s", "messages": [{"role": "user", "content": text("x")}]},
            format="json",
        ),
        agent_b_api.get(f"{BASE}/{gated}/checkpoint"),
        agent_b_api.get(f"{BASE}/{gated}/context"),
    ]:
        # Issue 33: the same 404 as an id that does not exist, naming no group (it was a 403 naming "team").
        assert_envelope(response, 404, "not_found")
        assert response.json()["error"] == f"No conversation '{gated}'."
    assert Message.objects.count() == 1

    # Without a group any agent key takes part.
    open_conversation = create(agent_a_api)
    assert post(agent_b_api, open_conversation, content="hi").status_code == 201


def test_viewer_reads_but_may_not_write(agent_a_api, viewer_api):
    conversation = create(agent_a_api, groupId="team")
    say(agent_a_api, conversation, "hello")
    assert listing(viewer_api, conversation)["data"][0]["content"] == text("hello")
    view = {"channel": "history", "view": "agent"}
    assert_envelope(viewer_api.get(f"{BASE}/{conversation}/messages", view), 400, "bad_request")
    assert len(listing(viewer_api, conversation, agentId="agent-a", **view)["data"]) == 1
    assert_envelope(viewer_api.post(BASE, {"userId": "u"}, format="json"), 403, "forbidden")
    assert_envelope(post(viewer_api, conversation, content="x"), 403, "forbidden")
    assert Message.objects.count() == 1


def test_admin_creates_and_posts_user_and_system_messages_only(admin_api, agent_a_api):
    conversation = create(admin_api, groupId="team")
    assert say(admin_api, conversation, "user said", role="user")["agentId"] is None
    assert say(admin_api, conversation, "be nice", role="system")["agentId"] is None
    assert_envelope(post(admin_api, conversation, content="x", role="assistant"), 403, "forbidden")
    assert_envelope(post(admin_api, conversation, content="x", channel="memory"), 403, "forbidden")
    assert_envelope(
        admin_api.post(BASE, {"userId": "u", "groupId": "nope"}, format="json"), 400, "bad_request"
    )
    # Unattributed messages are in every agent's isolated view.
    view = listing(agent_a_api, conversation, channel="history", view="agent")["data"]
    assert [m["role"] for m in view] == ["user", "system"]


def test_anonymous_gets_401(anon_api, agent_a_api):
    conversation = create(agent_a_api)
    assert_envelope(anon_api.get(f"{BASE}/{conversation}/messages"), 401, "unauthorized")
    assert_envelope(anon_api.post(BASE, {"userId": "u"}, format="json"), 401, "unauthorized")


@pytest.mark.parametrize(
    ("params", "message_part"),
    [
        ({"channel": "gossip"}, "channel"),
        ({"after": "not-a-uuid"}, "cursor"),
        ({"after": str(uuid.uuid4())}, "cursor"),
        ({"channel": "memory", "epoch": "-1"}, "epoch"),
        ({"channel": "memory", "epoch": "abc"}, "epoch"),
        ({"channel": "memory", "epoch": "0"}, "epoch"),
        ({"channel": "history", "epoch": "1"}, "epoch"),
        ({"channel": "summary", "view": "agent"}, "view"),
        ({"view": "everything"}, "view"),
        ({"limit": "0"}, "limit"),
        ({"limit": "201"}, "limit"),
    ],
)
def test_bad_list_input_is_a_400_envelope(agent_a_api, params, message_part):
    conversation = create(agent_a_api)
    body = assert_envelope(agent_a_api.get(f"{BASE}/{conversation}/messages", params), 400, "bad_request")
    assert message_part in body["error"]


@pytest.mark.parametrize(
    "message",
    [
        {"role": "user", "content": [], "sessionId": "s"},
        {"role": "user", "content": "hello", "sessionId": "s"},
        {"role": "user", "content": [{"text": "no type"}], "sessionId": "s"},
        {"role": "user", "content": text("x"), "sessionId": ""},
        {"role": "user", "content": text("x"), "sessionId": "   "},
        {"role": "robot", "content": text("x"), "sessionId": "s"},
        {"channel": "gossip", "role": "user", "content": text("x"), "sessionId": "s"},
        {"channel": "history", "role": "user", "content": text("x"), "sessionId": "s", "memoryEpoch": 1},
        {"channel": "memory", "role": "user", "content": text("x"), "sessionId": "s", "memoryEpoch": -1},
    ],
)
def test_bad_message_is_a_400_envelope_and_writes_nothing(agent_a_api, message):
    conversation = create(agent_a_api)
    response = agent_a_api.post(f"{BASE}/{conversation}/messages", message, format="json")
    assert_envelope(response, 400, "bad_request")
    assert Message.objects.count() == 0
    assert Conversation.objects.get().next_position == 1


def test_unknown_conversation_is_404(agent_a_api):
    for conversation in [str(uuid.uuid4()), "not-a-uuid"]:
        assert_envelope(agent_a_api.get(f"{BASE}/{conversation}"), 404, "not_found")
        assert_envelope(agent_a_api.get(f"{BASE}/{conversation}/messages"), 404, "not_found")
        assert_envelope(post(agent_a_api, conversation, content="x"), 404, "not_found")
        assert_envelope(agent_a_api.get(f"{BASE}/{conversation}/context"), 404, "not_found")


def test_a_conversation_the_caller_cannot_see_answers_as_one_that_does_not_exist(agent_a_api, agent_b_api):
    """Issue 33, finding 14: agent B is not in group ``team``. Every route of the team's conversation answers
    B exactly as for an unknown id (status and body, the id aside); nothing names the group."""
    gated = create(agent_a_api, groupId="team")
    unknown = str(uuid.uuid4())

    def answers(conversation_id: str) -> list[tuple[int, dict]]:
        sync = {"sessionId": "s", "messages": [{"role": "user", "content": text("x")}]}
        responses = [
            agent_b_api.get(f"{BASE}/{conversation_id}"),
            agent_b_api.get(f"{BASE}/{conversation_id}/messages"),
            agent_b_api.get(f"{BASE}/{conversation_id}/messages", {"channel": "memory"}),
            post(agent_b_api, conversation_id, content="let me in"),
            agent_b_api.post(f"{BASE}/{conversation_id}/memory/messages/sync", sync, format="json"),
            agent_b_api.get(f"{BASE}/{conversation_id}/checkpoint"),
            agent_b_api.put(f"{BASE}/{conversation_id}/checkpoint", {"lastEntryId": unknown}, format="json"),
            agent_b_api.get(f"{BASE}/{conversation_id}/context"),
        ]
        bodies = [r.json() for r in responses]
        return [
            (r.status_code, {**b, "error": b["error"].replace(conversation_id, "<id>")})
            for r, b in zip(responses, bodies, strict=True)
        ]

    seen, alike = answers(gated), answers(unknown)
    assert seen == alike
    assert {status for status, _ in seen} == {404}
    assert not any("team" in body["error"] or body["details"] for _, body in seen)
    assert not Message.objects.filter(conversation_id=gated).exists()
