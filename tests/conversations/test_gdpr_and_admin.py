"""GDPR erasure and export reach conversations; the admin shows them read-only."""

import pytest

from conversations.models import Checkpoint, Conversation, Message
from tests.conversations.utils import BASE, create, say, sync
from tests.factories import ConversationFactory, MessageFactory


def test_gdpr_erasure_removes_the_users_conversations(agent_a_api, admin_api):
    conversation = create(agent_a_api, "user-1")
    say(agent_a_api, conversation, "hi")
    entry = say(agent_a_api, conversation, "case", channel="summary", role="assistant")
    sync(agent_a_api, conversation, "memory")
    agent_a_api.put(f"{BASE}/{conversation}/checkpoint", {"lastEntryId": entry["id"]}, format="json")
    kept = create(agent_a_api, "user-2")
    say(agent_a_api, kept, "other user")

    erased = admin_api.delete("/usermemorystore/memories/user-1")
    assert erased.status_code == 200, erased.content
    assert erased.json()["conversations"] == {
        "conversationsDeleted": 1,
        "messagesDeleted": 3,
        "checkpointsDeleted": 1,
    }
    assert not Conversation.objects.filter(user_id="user-1").exists()
    assert Message.objects.filter(conversation_id=conversation).count() == 0
    assert Checkpoint.objects.count() == 0
    assert agent_a_api.get(f"{BASE}/{conversation}").status_code == 404
    assert Message.objects.filter(conversation_id=kept).count() == 1
    # Only an admin erases.
    assert agent_a_api.delete("/usermemorystore/memories/user-2").status_code == 403
    assert Conversation.objects.filter(user_id="user-2").exists()


def test_gdpr_export_includes_conversations(agent_a_api, admin_api):
    conversation = create(agent_a_api, "user-1")
    say(agent_a_api, conversation, "first")
    say(agent_a_api, conversation, "second", role="assistant")
    exported = admin_api.get("/usermemorystore/memories/user-1/export")
    assert exported.status_code == 200, exported.content
    data = exported.json()["conversations"]
    assert data["count"] == 1
    item = data["items"][0]
    assert item["id"] == conversation
    assert [m["content"][0]["text"] for m in item["messages"]] == ["first", "second"]
    assert set(item) == {"id", "groupId", "title", "createdAt", "messages", "checkpoints"}
    assert set(item["messages"][0]) == {
        "id", "seq", "channel", "role", "agentId", "memoryEpoch", "content", "sessionId", "createdAt",
    }  # fmt: skip
    assert [m["agentId"] for m in item["messages"]] == ["agent-a", "agent-a"]


@pytest.fixture
def staff_client(admin_client):
    return admin_client


def test_admin_lists_messages_filterable_by_channel_and_agent(staff_client, agent_a, agent_b):
    conversation = ConversationFactory()
    MessageFactory(conversation=conversation, seq=1, channel="history", agent=None)
    MessageFactory(conversation=conversation, seq=2, channel="memory", agent=agent_a, memory_epoch=1)
    MessageFactory(conversation=conversation, seq=3, channel="summary", agent=agent_b)

    page = staff_client.get("/admin/conversations/message/", {"channel": "memory"})
    assert page.status_code == 200
    assert len(page.context["cl"].result_list) == 1
    page = staff_client.get("/admin/conversations/message/", {"agent__id__exact": "agent-b"})
    assert [m.seq for m in page.context["cl"].result_list] == [3]

    detail = staff_client.get(f"/admin/conversations/conversation/{conversation.id}/change/")
    assert detail.status_code == 200
    assert detail.context["has_change_permission"] is False
    assert staff_client.get("/admin/conversations/message/add/").status_code == 403
    deleted = staff_client.post(
        f"/admin/conversations/conversation/{conversation.id}/delete/", {"post": "yes"}
    )
    assert deleted.status_code == 403
    assert Message.objects.count() == 3
