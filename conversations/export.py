"""The conversations' part of a user's GDPR export, in a format of its own (see :mod:`usermemory.export`).

Defined here field by field, not by the API's serializers, so renaming an API field cannot change the legal
export. It is part of the export's :data:`usermemory.export.EXPORT_FORMAT`: a change here raises that number.
"""

from typing import Any

from django.db.models import Prefetch

from conversations import selectors
from conversations.models import Checkpoint, Conversation, Message
from usermemory.export import iso


def _message(message: Message) -> dict[str, Any]:
    return {
        "id": str(message.id),
        "seq": message.seq,
        "channel": message.channel,
        "role": message.role,
        "agentId": message.agent_id,
        "memoryEpoch": message.memory_epoch,
        "content": message.content,
        "sessionId": message.session_id,
        "createdAt": iso(message.created_at),
    }


def _checkpoint(checkpoint: Checkpoint) -> dict[str, Any]:
    return {
        "agentId": checkpoint.agent_id,
        "lastMessageId": str(checkpoint.last_message_id),
        "updatedAt": iso(checkpoint.updated_at),
    }


def _conversation(conversation: Conversation) -> dict[str, Any]:
    return {
        "id": str(conversation.id),
        "groupId": conversation.group_id,
        "title": conversation.title,
        "createdAt": iso(conversation.created_at),
        "messages": [_message(message) for message in conversation.messages.all()],
        "checkpoints": [_checkpoint(checkpoint) for checkpoint in conversation.checkpoints.all()],
    }


def conversation_export_user(user_id: str) -> dict[str, Any]:
    """Every conversation of the user with all its messages and checkpoints (right of access)."""
    conversations = selectors.conversations_of_user(user_id=user_id).prefetch_related(
        Prefetch("messages", queryset=Message.objects.order_by("position")),
        Prefetch("checkpoints", queryset=Checkpoint.objects.order_by("agent_id")),
    )
    items = [_conversation(conversation) for conversation in conversations]
    return {"count": len(items), "items": items}
