"""The GDPR export (right of access): all of a user's data as JSON, in a format of its own.

The format is defined here, field by field, and versioned (``"format"``). It does not follow the API's
serializers, so renaming an API field can never change what a user is legally given. A change to the format
raises :data:`EXPORT_FORMAT` and says what changed.

The service :func:`usermemory.services.memory_export_user` adds the part of each app that keeps per-user
data (:func:`usermemory.services.register_user_data`); each app defines its part's format beside its service.
"""

from datetime import datetime
from typing import Any

from django.utils import timezone

from memoryplatform import publicids, replica
from usermemory.models import ConflictDismissal, MemoryEntry, MemoryEvent

EXPORT_FORMAT = 4
"""1: the user's memories, their history (with who could see each value), and each registered app's part.
Ids are the public ids the API shows (``memoryplatform.publicids``), as integers; before public ids, they were
the rows' own numbers, in the same field and type. 2: ``conflictDismissals``, the pairs of values staff
marked "not a conflict" (each key and value text, who, when). 3: ``replicaReplayedAt``, beside
``exportedAt``: when the export was read from a streaming replica, the commit time of the last transaction it
had replayed (the data is as of then, or later); ``null`` when it was read from the primary. 4:
``observedAt`` on each memory (when what its value says was observed) and on each history event (a write's:
when its new value was observed; ``null`` for other events)."""


def iso(moment: datetime | None) -> str | None:
    """A time as the export writes it: ISO 8601 with its offset, or ``None``."""
    return moment.isoformat() if moment is not None else None


def _entry(entry: MemoryEntry) -> dict[str, Any]:
    return {
        "id": publicids.to_public(publicids.ENTRY, entry.id),
        "key": entry.key,
        "value": entry.value,
        "category": entry.category,
        "visibility": entry.visibility,
        "ownerAgentId": entry.source_agent_id,
        "groupIds": list(entry.group_ids),
        "sourceConversationId": entry.source_conversation_id,
        "conflicted": entry.conflicted,
        "accessCount": entry.access_count,
        "createdAt": iso(entry.created_at),
        "updatedAt": iso(entry.updated_at),
        "observedAt": iso(entry.observed_at),
        "lastAccessedAt": iso(entry.last_accessed_at),
        "confidence": entry.confidence,
        "source": entry.source,
    }


def _event(event: MemoryEvent) -> dict[str, Any]:
    return {
        "id": publicids.to_public(publicids.EVENT, event.id),
        "entryId": None if event.entry_id is None else publicids.to_public(publicids.ENTRY, event.entry_id),
        "key": event.key,
        "action": event.action,
        "actorType": event.actor_type,
        "actorId": event.actor_id,
        "oldValue": event.old_value,
        "newValue": event.new_value,
        "ownerAgentId": event.owner or None,
        "oldVisibility": event.old_visibility,
        "oldGroupIds": list(event.old_group_ids),
        "visibility": event.visibility,
        "groupIds": list(event.group_ids),
        "at": iso(event.created_at),
        "observedAt": iso(event.observed_at),
    }


def user_export(*, user_id: str) -> dict[str, Any]:
    """The user's memories and history in the export format; the service adds each app's part."""
    entries = MemoryEntry.objects.filter(user_id=user_id).order_by("created_at", "id")
    events = MemoryEvent.objects.filter(user_id=user_id).order_by("created_at", "id")
    return {
        "format": EXPORT_FORMAT,
        "userId": user_id,
        "exportedAt": iso(timezone.now()),
        "replicaReplayedAt": iso(replica.replayed_at()),
        "memories": [_entry(entry) for entry in entries.iterator()],
        "history": [_event(event) for event in events.iterator()],
        "conflictDismissals": [
            {
                "keyA": d.key_a,
                "textA": d.text_a,
                "keyB": d.key_b,
                "textB": d.text_b,
                "by": d.dismissed_by,
                "at": iso(d.created_at),
            }
            for d in ConflictDismissal.objects.filter(user_id=user_id).order_by("created_at", "id")
        ],
    }
