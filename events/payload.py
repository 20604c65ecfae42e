"""An event as the feed and every webhook show it: one JSON shape, built here only.

``id`` is the event's public id (kind ``change``: a receiver drops a duplicate by it); ``entryId`` the
entry's public id. ``value``/``oldValue`` are the new and old values when the reader may see them, else
``null``. A ``user.erased`` event names the user only.
"""

from datetime import UTC, datetime
from typing import Any

from events.models import EventType
from events.store import SeenEvent
from memoryplatform import publicids


def _iso(value: datetime) -> str:
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def event_payload(seen: SeenEvent) -> dict[str, Any]:
    event = seen.event
    shown: dict[str, Any] = {
        "id": str(publicids.to_public(publicids.CHANGE, event.pk)),
        "type": event.type,
        "occurredAt": _iso(event.occurred_at),
        "userId": event.user_id,
    }
    if event.type == EventType.USER_ERASED:
        return shown
    entry = publicids.public_str(publicids.ENTRY, event.entry_id)
    return {
        **shown,
        "key": event.key or None,
        "entryId": entry,
        "visibility": event.visibility,
        "groupIds": event.group_ids or [],
        "sourceAgent": event.owner or None,
        "value": event.value,
        "oldValue": event.old_value,
        "valueHidden": seen.new_value_hidden,
        "data": event.data,
    }
