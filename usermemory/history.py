"""History as services record it: who made a change (:class:`Actor`), who could see a value then
(:class:`Scope`), and the events of one service call, written in one insert (:class:`EventLog`); and as staff
read it: what made each change (:func:`origin_of`) and the event that wrote an entry's value
(:func:`entry_value_event`)."""

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import F, Q

from apikeys.caller import Caller
from memoryplatform import publicids
from usermemory.models import (
    MemoryEvent,
    Visibility,
)


@dataclass
class Actor:
    """Who made a change, as history records it."""

    actor_type: str
    actor_id: str
    key_prefix: str = ""

    @classmethod
    def of(cls, caller: Caller) -> "Actor":
        prefix = caller.key.prefix if caller.key else ""
        if caller.agent is not None:
            return cls(MemoryEvent.ActorType.AGENT, caller.agent.id, prefix)
        if caller.key is not None:
            return cls(MemoryEvent.ActorType.KEY, f"{caller.role}:{prefix}", prefix)
        return cls(MemoryEvent.ActorType.STAFF, getattr(caller.user, "username", ""), "")


@dataclass(frozen=True)
class Scope:
    """Who could see a value when history recorded it: the entry's visibility, owner and groups."""

    visibility: str
    owner: str | None
    group_ids: list[str]

    @classmethod
    def of(cls, row: Any) -> "Scope":
        """The scope of an entry, or of a ``values()`` row of one."""
        if isinstance(row, dict):
            return cls(row["visibility"], row["source_agent_id"], row["group_ids"])
        return cls(row.visibility, row.source_agent_id, row.group_ids)


# An event with no entry behind it (erasure): seen by no agent.
NO_AGENT = Scope(Visibility.SELF, None, [])
SCOPE_FIELDS = ("visibility", "source_agent_id", "group_ids")


@dataclass
class EventLog:
    """Events gathered during one service call and written in one bulk insert."""

    actor: Actor
    events: list[MemoryEvent] = field(default_factory=list)

    def add(
        self,
        action: str,
        *,
        entry_id: int | None,
        user_id: str,
        key: str,
        old: Any = None,
        new: Any = None,
        at: datetime,
        scope: Scope,
        old_scope: Scope | None = None,
    ) -> None:
        """``scope``: who could see ``new`` (the entry after the change, or as it was when it goes);
        ``old_scope``: who could see ``old``, when the change moved the entry (same owner, other visibility
        or groups)."""
        old_scope = old_scope or scope
        self.events.append(
            MemoryEvent(
                entry_id=entry_id,
                user_id=user_id,
                key=key,
                action=action,
                actor_type=self.actor.actor_type,
                actor_id=self.actor.actor_id,
                key_prefix=self.actor.key_prefix,
                old_value=old,
                new_value=new,
                owner=scope.owner or "",
                old_visibility=old_scope.visibility,
                old_group_ids=old_scope.group_ids,
                visibility=scope.visibility,
                group_ids=scope.group_ids,
                created_at=at,
            )
        )

    def flush(self) -> None:
        """Write the gathered events, and announce the call's history (:func:`history_announce`): an
        upsert's own statement wrote its event already."""
        if self.events:
            MemoryEvent.objects.bulk_create(self.events)
            self.events.clear()
        history_announce()


HistoryListener = Callable[[], None]
_HISTORY_LISTENERS: list[HistoryListener] = []


def register_history_listener(listener: HistoryListener) -> None:
    """Call ``listener`` after each commit that wrote history: the events app's delivery nudge (its outbox
    trigger turns history rows into events), so that usermemory, below that app, names none of it."""
    if listener not in _HISTORY_LISTENERS:
        _HISTORY_LISTENERS.append(listener)


def history_announce() -> None:
    """The current transaction wrote history: once it commits, call every listener (``robust``: one that
    raises is logged by Django, never the write's failure)."""
    for listener in _HISTORY_LISTENERS:
        transaction.on_commit(listener, robust=True)


def provenance_shown(provenance: dict[str, Any] | None) -> dict[str, Any] | None:
    """An event's provenance as the doors show it. It is stored with the rows' own numbers; the extraction
    that wrote the value (``extraction``) is shown by its public id, since its row number counts every
    agent's extractions (issue 44, finding 10). Staff's admin shows the stored form."""
    if not provenance or not isinstance(provenance.get("extraction"), int):
        return provenance
    return {**provenance, "extraction": publicids.public_str(publicids.EXTRACTION, provenance["extraction"])}


# What makes a change, as staff read it (:func:`origin_of`). The REST API, MCP and the LLM tools record the
# same actor (the agent and its key) and no door of their own, so they share one trigger: "API".
EXTRACTION_SOURCE = "extracted"  # the ``source`` extraction writes on an entry and in its events' provenance
IMPORT_SOURCE = "import"


@dataclass(frozen=True)
class Origin:
    """What made a change (``trigger``: an extraction, the API, an import, staff in the admin, Dream) and who
    (``by``: the agent and key, the staff user, the Dream run), with what an extraction's provenance names:
    the extraction's row, the conversation and messages it cites and the model."""

    trigger: str
    by: str
    extraction: int | None = None
    conversation_id: str | None = None
    message_ids: tuple[str, ...] = ()
    model: str = ""
    prompt_version: str = ""
    confidence: float | None = None
    dream_run: int | None = None
    detail: str = ""


def _run_of(actor_id: str) -> int | None:
    """The Dream run an actor id ``run:<pk>`` names."""
    head, _, number = actor_id.partition(":")
    return int(number) if head == "run" and number.isascii() and number.isdigit() else None


def _by(event: MemoryEvent) -> str:
    if event.actor_type == MemoryEvent.ActorType.AGENT:
        return f"{event.actor_id} (key {event.key_prefix})" if event.key_prefix else event.actor_id
    return event.actor_id


def _trigger(event: MemoryEvent, provenance: dict[str, Any]) -> str:
    source = provenance.get("source")
    if source == EXTRACTION_SOURCE:
        run = str(provenance.get("trigger") or "api")
        return f"extraction ({'API' if run == 'api' else run})"
    if source == IMPORT_SOURCE:
        return "import"
    by_actor: dict[str, str] = {
        MemoryEvent.ActorType.STAFF: "admin",
        MemoryEvent.ActorType.DREAM: "Dream",
        MemoryEvent.ActorType.KEY: "API (admin key)",
    }
    return by_actor.get(event.actor_type, "API")


def origin_of(event: MemoryEvent) -> Origin:
    """What made ``event``'s change, from its actor and its provenance (stored form: the extraction by its
    row)."""
    provenance = event.provenance if isinstance(event.provenance, dict) else {}
    extraction = provenance.get("extraction")
    confidence = provenance.get("confidence")
    detail = ""
    if provenance.get("source") == IMPORT_SOURCE:
        detail = f"{provenance.get('format', '')} file, line {provenance.get('line', '?')}".strip()
    return Origin(
        trigger=_trigger(event, provenance),
        by=_by(event),
        extraction=extraction if isinstance(extraction, int) else None,
        conversation_id=str(provenance["conversationId"]) if provenance.get("conversationId") else None,
        message_ids=tuple(str(m) for m in provenance.get("messageIds") or ()),
        model=str(provenance.get("model") or ""),
        prompt_version=str(provenance.get("promptVersion") or ""),
        confidence=confidence if isinstance(confidence, int | float) else None,
        dream_run=_run_of(event.actor_id) if event.actor_type == MemoryEvent.ActorType.DREAM else None,
        detail=detail,
    )


def entry_value_event(*, entry_id: int) -> MemoryEvent | None:
    """The event that wrote the entry's current value: its last ``created`` or ``updated`` event, or a
    settled conflict that gave it another entry's value (``memory_event_entry_idx`` finds them)."""
    wrote = Q(action__in=[MemoryEvent.Action.CREATED, MemoryEvent.Action.UPDATED]) | (
        Q(action=MemoryEvent.Action.RESOLVED) & ~Q(new_value=F("old_value"))
    )
    return MemoryEvent.objects.filter(wrote, entry_id=entry_id).order_by("-created_at", "-id").first()
