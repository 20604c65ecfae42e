"""What the MCP tools share of their input: the JSON Schema of the arguments many tools take (a user, an
agent, groups, a key, a page), and the translation of those arguments for the services."""

from datetime import UTC, datetime
from typing import Any

from django.utils import timezone
from django.utils.dateparse import parse_datetime

from memoryplatform import publicids
from memoryplatform.errors import BadRequest
from usermemory.models import MAX_KEY_CHARS
from usermemory.writerules import checked_time

MAX_LIST = 1000
DEFAULT_LIST = 100
MAX_OFFSET = 2**31 - 1


# --- Input schemas --------------------------------------------------------------------------------------

USER_ID = {"type": "string", "minLength": 1, "maxLength": 255, "description": "The end user's id."}
MAX_GROUPS = 50
GROUP_ID_MAX = 64
GROUP_IDS = {
    "type": ["string", "array"],
    "items": {"type": "string", "minLength": 1, "maxLength": GROUP_ID_MAX},
    "maxItems": MAX_GROUPS,
    "maxLength": MAX_GROUPS * (GROUP_ID_MAX + 1),
    "description": "Group context, comma-separated (EDDI) or a list. With an agent key: groups the agent is "
    "in (default: all of them).",
}
KEY = {"type": "string", "minLength": 1, "maxLength": MAX_KEY_CHARS, "description": "The memory's key."}
AGENT_ID = {
    "type": ["string", "null"],
    "maxLength": 64,
    "description": "The agent. With an agent key: that agent, or left out.",
}
LIMIT = {
    "type": "integer",
    "minimum": 1,
    "maximum": MAX_LIST,
    "description": f"At most this many (default {DEFAULT_LIST}).",
}
OFFSET = {
    "type": "integer",
    "minimum": 0,
    "maximum": MAX_OFFSET,
    "description": "Skip this many (default 0).",
}


OBSERVED_AT = {
    "type": ["string", "null"],
    "format": "date-time",
    "description": "When what the value says was observed (ISO 8601; default: now). A write observed before "
    "the stored value on its key was is not written: the answer says skipped, with both times.",
}


def object_schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


def given_group_ids(args: dict[str, Any]) -> list[str] | None:
    """``groupIds`` as EDDI sends it (one comma-separated string) or as a list; absent or empty: ``None``."""
    raw = args.get("groupIds")
    if raw is None:
        return None
    if isinstance(raw, str):
        groups = [part.strip() for part in raw.split(",") if part.strip()]
        if len(groups) > MAX_GROUPS or any(len(group) > GROUP_ID_MAX for group in groups):
            raise BadRequest(f"groupIds: at most {MAX_GROUPS} ids of at most {GROUP_ID_MAX} characters each.")
        return groups or None
    return list(raw)


def given_agent_id(args: dict[str, Any]) -> str | None:
    """EDDI's ``agentId``, or this server's older name for it on writes, ``sourceAgentId``."""
    agent_id, source_agent_id = args.get("agentId"), args.get("sourceAgentId")
    if agent_id is not None and source_agent_id is not None and agent_id != source_agent_id:
        raise BadRequest("agentId and sourceAgentId name different agents; give one of them.")
    return agent_id if agent_id is not None else source_agent_id


def given_entry_id(args: dict[str, Any]) -> int:
    """An entry's public id (or a legacy one) as the internal id it names: ASCII digits only."""
    entry_id = publicids.parse(publicids.ENTRY, args["entryId"])
    if entry_id is None:
        raise BadRequest("entryId must be a memory entry id as this server gave it, in digits 0-9.")
    return entry_id


def given_time(args: dict[str, Any], name: str) -> datetime | None:
    """An ISO 8601 time argument (a time without a zone is UTC), checked as every door checks a time
    (:func:`usermemory.writerules.checked_time`); ``None`` when it is absent."""
    value = args.get(name)
    if value is None:
        return None
    try:
        parsed = parse_datetime(value)
    except ValueError:  # the shape of a time, not one (a month 13, an offset of 24 hours)
        parsed = None
    if parsed is None:
        raise BadRequest(f"{name} must be an ISO 8601 time, e.g. 2026-01-31T12:00:00Z.")
    return checked_time(name, parsed if timezone.is_aware(parsed) else timezone.make_aware(parsed, UTC))
