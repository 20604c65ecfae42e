"""A write as a door gives it (:class:`MemoryWrite`), and the checks of its fields that every door shares,
before :mod:`usermemory.upsert` applies the rules that need the store (owner, groups, cap, turns)."""

from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings

from memoryplatform.errors import BadRequest
from memoryplatform.text import json_problem, text_problem
from usermemory.models import EARLIEST_TIME, LATEST_TIME, MAX_SOURCE_CHARS, AgentMemoryPolicy, Visibility

MAX_TTL_SECONDS = 100 * 365 * 24 * 3600  # a century: any longer is no TTL
MAX_CLOCK_SKEW = timedelta(minutes=5)  # an observedAt this far ahead of the server's clock is taken as now


@dataclass(frozen=True)
class MemoryWrite:
    """One upsert as a door received it. ``category=None`` keeps the stored category (legacy properties)."""

    user_id: str
    key: str
    value: Any
    category: str | None = "fact"
    visibility: str = Visibility.SELF
    source_agent_id: str | None = None
    group_ids: list[str] | None = None
    source_conversation_id: str | None = None
    valid_to: datetime | None = None  # the value holds until then; None: until changed
    ttl_seconds: int | None = None  # or for this long from the write (valid_to = now + it)
    confidence: float | None = None
    source: str | None = None
    # Where the value came from, recorded on its history event (extraction: source, confidence, conversation,
    # messages, model, prompt version); set by the platform's own doors only, never from a request.
    provenance: dict[str, Any] | None = None
    # When what the value says was observed (time order): an extracted fact's message's time, or what the
    # caller gives (observedAt). None: the write's time. A write observed before the stored value on its key
    # was is not written.
    observed_at: datetime | None = None


def check_storable(write: MemoryWrite) -> None:
    """What any database refuses (NUL, lone surrogates), refused here first, whatever the door."""
    texts = {
        "userId": write.user_id,
        "key": write.key,
        "category": write.category,
        "sourceAgentId": write.source_agent_id,
        "sourceConversationId": write.source_conversation_id,
    }
    for name, text in texts.items():
        problem = text_problem(text) if isinstance(text, str) else None
        if problem:
            raise BadRequest(f"{name} {problem}.")
    for group_id in write.group_ids or []:
        if not isinstance(group_id, str):
            raise BadRequest("groupIds must be a list of strings.")
        problem = text_problem(group_id)
        if problem:
            raise BadRequest(f"groupIds: a group id {problem}.")
    problem = json_problem(write.value)
    if problem:
        raise BadRequest(f"value: {problem}.")


def checked_time(name: str, value: datetime) -> datetime:
    """A time a caller gives (``name`` is its field), in UTC: the one check of every time at every door
    (REST, batches, imports, MCP, the LLM tools, the clients). It needs a time zone, and must lie from
    :data:`EARLIEST_TIME` to :data:`LATEST_TIME` once in UTC (``0001-01-01T00:00:00+00:01`` is 1 BC there)."""
    if not isinstance(value, datetime):
        raise BadRequest(f"{name} must be an ISO 8601 time, e.g. 2026-01-31T12:00:00Z.")
    if value.utcoffset() is None:
        raise BadRequest(f"{name} needs a time zone (an ISO 8601 time with Z or an offset).")
    try:
        utc = value.astimezone(UTC)
    except OverflowError:
        utc = None
    if utc is None or not EARLIEST_TIME <= utc <= LATEST_TIME:
        raise BadRequest(
            f"{name} must be a time from {EARLIEST_TIME.date()} to {LATEST_TIME.date()} (UTC).",
            details={name: value.isoformat()},
        )
    return utc


def with_expiry(write: MemoryWrite, now: datetime) -> MemoryWrite:
    """The write with its ``valid_to``: the one given (in the future), or ``now`` plus ``ttl_seconds``. The
    one place a TTL becomes a time, whatever the door."""
    ttl = write.ttl_seconds
    if ttl is None:
        if write.valid_to is not None:
            write = replace(write, valid_to=checked_time("validTo", write.valid_to))
        if write.valid_to is not None and write.valid_to <= now:
            raise BadRequest("validTo must be in the future: an entry is valid from its write until validTo.")
        return write
    if isinstance(ttl, bool) or not isinstance(ttl, int) or not 1 <= ttl <= MAX_TTL_SECONDS:
        raise BadRequest(f"ttlSeconds must be a whole number from 1 to {MAX_TTL_SECONDS}.")
    if write.valid_to is not None:
        raise BadRequest("Give validTo or ttlSeconds, not both.")
    return replace(write, valid_to=now + timedelta(seconds=ttl))


def check_insight(write: MemoryWrite) -> None:
    """``confidence`` from 0 to 1 (a number, not a boolean), ``source`` at most ``MAX_SOURCE_CHARS``."""
    confidence = write.confidence
    if confidence is not None and (
        isinstance(confidence, bool) or not isinstance(confidence, int | float) or not 0 <= confidence <= 1
    ):
        raise BadRequest("confidence must be a number from 0 to 1.", details={"confidence": confidence})
    if write.source is not None and (
        not isinstance(write.source, str) or len(write.source) > MAX_SOURCE_CHARS
    ):
        raise BadRequest(f"source must be a text of at most {MAX_SOURCE_CHARS} characters.")


def check_value_size(text: str) -> None:
    """The absolute limit on a value's text, for every key (admin included) and every door."""
    limit = settings.MEMORY_MAX_VALUE_CHARS
    if len(text) > limit:
        raise BadRequest(
            f"value is {len(text)} characters; the limit (MEMORY_MAX_VALUE_CHARS) is {limit}.",
            details={"limit": "MEMORY_MAX_VALUE_CHARS", "max": limit},
        )


def check_guardrails(
    policy: AgentMemoryPolicy, write: MemoryWrite, text: str, *, system_category: bool = False
) -> None:
    """EDDI's guardrails, for writes made with an agent key. ``system_category``: the category is the
    platform's own (a task's result, ``task_result``), not the agent's choice, so ``allowedCategories`` does
    not apply; the sizes do."""
    if len(write.key) > policy.max_key_length:
        raise BadRequest(
            f"key is {len(write.key)} characters; the limit (maxKeyLength) is {policy.max_key_length}.",
            details={"limit": "maxKeyLength", "max": policy.max_key_length},
        )
    if len(text) > policy.max_value_length:
        raise BadRequest(
            f"value is {len(text)} characters; the limit (maxValueLength) is {policy.max_value_length}.",
            details={"limit": "maxValueLength", "max": policy.max_value_length},
        )
    allowed = policy.allowed_categories
    if write.category is not None and allowed and write.category not in allowed and not system_category:
        raise BadRequest(
            f"category '{write.category}' is not allowed (allowedCategories: {', '.join(allowed)}).",
            details={"limit": "allowedCategories", "allowed": allowed},
        )


def with_observed_at(write: MemoryWrite, now: datetime) -> MemoryWrite:
    """The write with the ``observed_at`` it gave, checked: a time ahead of ``now`` by at most
    :data:`MAX_CLOCK_SKEW` is a caller's clock running ahead, and taken as ``now``; further ahead is a 400
    (a value observed in the future would hold its key against every write until then). A write that gives
    none is observed when it is written, once it holds the user's lock (:mod:`usermemory.upsert`), so
    writes that give no time keep the order in which they commit."""
    if write.observed_at is None:
        return write
    observed = checked_time("observedAt", write.observed_at)
    if observed > now + MAX_CLOCK_SKEW:
        raise BadRequest(
            "observedAt must not be in the future: it says when what the value says was observed.",
            details={"observedAt": observed.isoformat(), "now": now.isoformat()},
        )
    return replace(write, observed_at=min(observed, now))
