"""The shared case log (seed 003): append-only, checkpoints, and the agent context in one call."""

import uuid
from datetime import datetime
from zoneinfo import ZoneInfo

from conversations.models import Message
from tests.conversations.utils import BASE, create, listing, post, say, sync, text, texts
from tests.helpers import assert_envelope


def test_case_log_is_shared_and_append_only(agent_a_api, agent_b_api, admin_api):
    conversation = create(agent_a_api)
    entry = say(agent_a_api, conversation, "refund approved", channel="summary", role="assistant")
    say(agent_b_api, conversation, "label sent", channel="summary", role="assistant")
    log = listing(agent_b_api, conversation, channel="summary")["data"]
    assert texts(log) == ["refund approved", "label sent"]
    assert [m["agentId"] for m in log] == ["agent-a", "agent-b"]

    messages = f"{BASE}/{conversation}/messages"
    for client in (agent_a_api, admin_api):
        assert_envelope(client.delete(messages), 405, "method_not_allowed")
        assert_envelope(client.put(messages, {"content": []}, format="json"), 405, "method_not_allowed")
        assert_envelope(client.patch(messages, {"content": []}, format="json"), 405, "method_not_allowed")
        assert_envelope(client.delete(f"{messages}/{entry['id']}"), 404, "not_found")
    assert Message.objects.filter(channel="summary").count() == 2


def test_checkpoint_protocol(agent_a_api, agent_b_api, viewer_api):
    conversation = create(agent_a_api)
    url = f"{BASE}/{conversation}/checkpoint"
    assert agent_a_api.get(url).json()["lastEntryId"] is None

    first = say(agent_b_api, conversation, "s1", channel="summary", role="assistant")
    say(agent_b_api, conversation, "s2", channel="summary", role="assistant")
    stored = agent_a_api.put(url, {"lastEntryId": first["id"]}, format="json")
    assert stored.status_code == 200, stored.content
    assert stored.json()["lastEntryId"] == first["id"] and stored.json()["agentId"] == "agent-a"
    assert agent_a_api.get(url).json()["lastEntryId"] == first["id"]
    assert agent_b_api.get(url).json()["lastEntryId"] is None  # per agent
    assert viewer_api.get(url, {"agentId": "agent-a"}).json()["lastEntryId"] == first["id"]
    assert_envelope(viewer_api.get(url), 400, "bad_request")

    after = listing(
        agent_a_api, conversation, channel="summary", after=agent_a_api.get(url).json()["lastEntryId"]
    )
    assert texts(after["data"]) == ["s2"]

    not_case_log = say(agent_a_api, conversation, "history", role="user")
    assert_envelope(
        agent_a_api.put(url, {"lastEntryId": not_case_log["id"]}, format="json"), 400, "bad_request"
    )
    assert_envelope(agent_a_api.put(url, {"lastEntryId": "nope"}, format="json"), 400, "bad_request")
    assert_envelope(viewer_api.put(url, {"lastEntryId": first["id"]}, format="json"), 403, "forbidden")
    assert agent_a_api.get(url).json()["lastEntryId"] == first["id"]


def test_context_holds_exactly_the_agents_own_streams(agent_a_api, agent_b_api, admin_api):
    memories = "/usermemorystore/memories"
    for client, body in [
        (agent_a_api, {"key": "a_private", "value": "a", "visibility": "self"}),
        (agent_b_api, {"key": "b_private", "value": "b", "visibility": "self"}),
        (agent_b_api, {"key": "shared", "value": "s", "visibility": "global"}),
        (agent_a_api, {"key": "team_note", "value": "t", "visibility": "group", "groupIds": ["team"]}),
    ]:
        response = client.put(memories, {"userId": "user-9", "category": "fact", **body}, format="json")
        assert response.status_code == 201, response.content

    conversation = create(agent_a_api, "user-9", groupId="team")
    b_conversation = create(agent_b_api, "user-9")
    sync(agent_a_api, conversation, "a old")
    sync(agent_a_api, conversation, "a new")  # a new epoch: only this one is in the context
    say(agent_a_api, conversation, "user asks")
    say(agent_a_api, conversation, "a answers", role="assistant")
    log1 = say(agent_a_api, conversation, "case 1", channel="summary", role="assistant")
    say(agent_a_api, conversation, "case 2", channel="summary", role="assistant")
    agent_a_api.put(f"{BASE}/{conversation}/checkpoint", {"lastEntryId": log1["id"]}, format="json")
    # Agent B has private streams in its own conversation with the same user.
    sync(agent_b_api, b_conversation, "b memory")
    say(agent_b_api, b_conversation, "b answers", role="assistant")

    response = agent_a_api.get(f"{BASE}/{conversation}/context")
    assert response.status_code == 200, response.content
    context = response.json()
    assert context["agentId"] == "agent-a" and context["conversation"]["id"] == conversation
    assert context["memory"]["memoryEpoch"] == 2
    assert texts(context["memory"]["messages"]) == ["a new"]
    assert context["caseLog"]["checkpoint"] == log1["id"]
    assert texts(context["caseLog"]["data"]) == ["case 2"]
    assert context["caseLog"]["nextCursor"] is None
    assert texts(context["history"]) == ["user asks", "a answers"]
    assert {m["key"] for m in context["userMemories"]} == {"a_private", "shared", "team_note"}

    # Agent B may not read A's context, nor take part in the team's conversation.
    assert_envelope(agent_b_api.get(f"{BASE}/{conversation}/context"), 404, "not_found")  # issue 33: was 403
    b_context = agent_b_api.get(f"{BASE}/{b_conversation}/context").json()
    assert texts(b_context["memory"]["messages"]) == ["b memory"]
    assert texts(b_context["history"]) == ["b answers"]
    assert {m["key"] for m in b_context["userMemories"]} == {"b_private", "shared"}

    # An admin reads an agent's context by naming it, and must name it.
    assert_envelope(admin_api.get(f"{BASE}/{conversation}/context"), 400, "bad_request")
    as_admin = admin_api.get(f"{BASE}/{conversation}/context", {"agentId": "agent-a"}).json()
    assert texts(as_admin["memory"]["messages"]) == ["a new"]


def test_context_uses_the_agents_recall_policy(agent_a_api):
    from usermemory.services import policy_update

    policy_update(agent_id="agent-a", max_recall_entries=2, recall_order="most_recent")
    for key in ["k1", "k2", "k3"]:
        agent_a_api.put(
            "/usermemorystore/memories", {"userId": "user-7", "key": key, "value": key}, format="json"
        )
    conversation = create(agent_a_api, "user-7")
    context = agent_a_api.get(f"{BASE}/{conversation}/context").json()
    assert [m["key"] for m in context["userMemories"]] == ["k3", "k2"]


def _append(client, conversation: str, prefix: str, count: int, **message) -> None:
    """``count`` messages in batches of 20."""
    for start in range(0, count, 20):
        batch = [
            {"role": "assistant", "content": text(f"{prefix}{i}"), **message}
            for i in range(start, min(start + 20, count))
        ]
        response = client.post(f"{BASE}/{conversation}/messages", {"messages": batch}, format="json")
        assert response.status_code == 201, response.content


def test_context_pages_its_case_log_and_keeps_the_latest_history(agent_a_api, agent_b_api):
    """The case log after the checkpoint is one page of 200 with a cursor to the next; the history is the
    latest 50 messages the agent sees, oldest first; the memory stream is the latest epoch's, in order."""
    conversation = create(agent_a_api)
    _append(agent_b_api, conversation, "log ", 202, channel="summary")
    _append(agent_a_api, conversation, "a ", 40)
    _append(agent_b_api, conversation, "b ", 30)  # not seen by agent A: another agent's replies
    _append(agent_a_api, conversation, "a2 ", 15)
    sync(agent_a_api, conversation, "m1", "m2", "m3")

    context = agent_a_api.get(f"{BASE}/{conversation}/context").json()
    log = context["caseLog"]
    assert texts(log["data"]) == [f"log {i}" for i in range(200)]
    assert log["checkpoint"] is None and log["nextCursor"] == log["data"][-1]["id"]
    rest = listing(agent_a_api, conversation, channel="summary", after=log["nextCursor"])
    assert texts(rest["data"]) == ["log 200", "log 201"]
    assert texts(context["history"]) == [f"a {i}" for i in range(5, 40)] + [f"a2 {i}" for i in range(15)]
    assert [m["seq"] for m in context["history"]] == sorted(m["seq"] for m in context["history"])
    assert texts(context["memory"]["messages"]) == ["m1", "m2", "m3"]

    agent_a_api.put(
        f"{BASE}/{conversation}/checkpoint", {"lastEntryId": log["data"][199]["id"]}, format="json"
    )
    after = agent_a_api.get(f"{BASE}/{conversation}/context").json()["caseLog"]
    assert texts(after["data"]) == ["log 200", "log 201"] and after["nextCursor"] is None


def test_an_unknown_conversation_answers_404_before_the_agent_is_checked(agent_a_api, viewer_api):
    """The context names its agent (agentId for viewer and admin keys); an unknown conversation is a 404 all
    the same, as every other route of it answers, whatever the agent named."""
    unknown = f"{BASE}/{uuid.uuid4()}/context"
    assert_envelope(viewer_api.get(unknown), 404, "not_found")
    assert_envelope(viewer_api.get(unknown, {"agentId": "no-such-agent"}), 404, "not_found")
    assert_envelope(agent_a_api.get(unknown, {"agentId": "agent-b"}), 404, "not_found")
    conversation = create(agent_a_api)
    known = f"{BASE}/{conversation}/context"
    assert_envelope(viewer_api.get(known), 400, "bad_request")
    assert_envelope(viewer_api.get(known, {"agentId": "no-such-agent"}), 404, "not_found")
    assert_envelope(agent_a_api.get(known, {"agentId": "agent-b"}), 403, "forbidden")


def test_fast_message_rendering_matches_drf_fields(agent_a_api):
    """Messages are rendered directly, from instances and from the context's rows alike; the answer must equal
    DRF's own rendering of the serializer's fields."""
    from rest_framework import serializers

    from conversations.api.serializers import MessageOutputSerializer
    from conversations.store import MessageRow

    conversation = create(agent_a_api)
    say(agent_a_api, conversation, "hello", sessionId="s-1")
    sync(agent_a_api, conversation, "remembered")
    blocks = [{"type": "text", "text": "x"}, {"type": "image", "url": "u", "meta": {"a": [1, None]}}]
    post(agent_a_api, conversation, content=blocks, role="assistant", sessionId=None)
    for message in Message.objects.all():
        slow = serializers.ModelSerializer.to_representation(MessageOutputSerializer(), message)
        assert dict(MessageOutputSerializer(message).data) == dict(slow)
        row = MessageRow(*(getattr(message, name) for name in MessageRow._fields))
        assert dict(MessageOutputSerializer(row).data) == dict(slow)
        # A time in another zone is written in UTC all the same.
        message.created_at = datetime(2026, 7, 1, 12, 30, 5, 120, tzinfo=ZoneInfo("Europe/Paris"))
        fast = MessageOutputSerializer(message).data
        assert dict(fast) == dict(
            serializers.ModelSerializer.to_representation(MessageOutputSerializer(), message)
        )
        assert fast["createdAt"] == "2026-07-01T10:30:05.000120Z"


def test_fast_context_rendering_matches_drf_fields(agent_a_api):
    """The context and its conversation are rendered directly; the answer must equal DRF's own rendering of
    the serializers' fields, with every part filled: memory, case log and checkpoint, history, memories."""
    from rest_framework import serializers

    from apikeys.caller import Caller
    from apikeys.models import ApiKey
    from conversations.api.serializers import ContextOutputSerializer, ConversationOutputSerializer
    from conversations.models import Conversation
    from conversations.services import conversation_context

    agent_a_api.put(
        "/usermemorystore/memories", {"userId": "user-1", "key": "k", "value": "v"}, format="json"
    )
    conversation = create(agent_a_api, title="a title")
    sync(agent_a_api, conversation, "m1", "m2")
    say(agent_a_api, conversation, "hello")
    first = say(agent_a_api, conversation, "log 1", channel="summary", role="assistant")
    say(agent_a_api, conversation, "log 2", channel="summary", role="assistant")
    agent_a_api.put(f"{BASE}/{conversation}/checkpoint", {"lastEntryId": first["id"]}, format="json")

    stored = Conversation.objects.get()
    assert dict(ConversationOutputSerializer(stored).data) == dict(
        serializers.ModelSerializer.to_representation(ConversationOutputSerializer(), stored)
    )
    caller = Caller.for_key(ApiKey.objects.select_related("agent").get(agent_id="agent-a"))
    context = conversation_context(caller=caller, conversation_id=conversation)
    fast = ContextOutputSerializer(context).data
    slow = serializers.Serializer.to_representation(ContextOutputSerializer(), context)
    assert fast == slow
    assert texts(fast["memory"]["messages"]) == ["m1", "m2"] and texts(fast["caseLog"]["data"]) == ["log 2"]
    assert fast["userMemories"] and fast["conversation"]["title"] == "a title"
