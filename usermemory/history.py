"""History as services record it: who made a change (:class:`Actor`), who could see a value then
(:class:`Scope`), and the events of one service call, written in one insert (:class:`EventLog`)."""

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

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
        if self.events:
            MemoryEvent.objects.bulk_create(self.events)
            self.events.clear()


def provenance_shown(provenance: dict[str, Any] | None) -> dict[str, Any] | None:
    """An event's provenance as the doors show it. It is stored with the rows' own numbers; the extraction
    that wrote the value (``extraction``) is shown by its public id, since its row number counts every
    agent's extractions (issue 44, finding 10). Staff's admin shows the stored form."""
    if not provenance or not isinstance(provenance.get("extraction"), int):
        return provenance
    return {**provenance, "extraction": publicids.public_str(publicids.EXTRACTION, provenance["extraction"])}
