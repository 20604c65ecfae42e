"""What an agent has extracted of a stored conversation, whichever door did it, and the stored messages an
extraction reads.

**Covered.** A message is covered for an agent when it is at or under the agent's watermark in the
conversation (:class:`extraction.models.ExtractionWatermark`: the background's, by ``position``) or, past it,
when a door extracted it (:class:`extraction.models.ExtractedMessage`). No door extracts a covered message
again: the background reads past the watermark and leaves the others out; the extract door leaves them out
of what it reads or is sent (:func:`claim`).

**Claimed in the writes' transaction.** The door records what it extracted in the transaction that writes
the facts (:func:`claim`): it locks the watermark's row, refuses (409, nothing written) when a message was
covered meanwhile (the background read it while the door's model was answering), records the messages past
the watermark, and moves the watermark forward over every message covered from it on (:func:`settle`),
never backward. The background's commit takes the same row lock (its compare-and-set), then drops its batch
when a door claimed one of its messages meanwhile, so one message is never extracted twice.
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Exists, OuterRef, Q, QuerySet
from django.utils import timezone

from apikeys.models import Agent
from conversations.models import Channel, Conversation, Message, MessageRole
from conversations.selectors import uuid_or_none
from extraction.decide import Bound
from extraction.models import ExtractedMessage, ExtractionWatermark
from memoryplatform.errors import BadRequest, Conflict
from memoryplatform.text import is_blank
from usermemory.models import Visibility

SETTLE_CHUNK = 500  # messages read at a time while the watermark moves over covered ones


def readable(agent_id: str) -> Q:
    """The messages of a conversation the agent may read: the history as it sees it (every user message,
    the messages with no author, its own), the case log, and its own memory channel."""
    history = Q(channel=Channel.HISTORY) & (
        Q(role=MessageRole.USER) | Q(agent__isnull=True) | Q(agent_id=agent_id)
    )
    return history | Q(channel=Channel.SUMMARY) | Q(channel=Channel.MEMORY, agent_id=agent_id)


def message_text(content: Any) -> str:
    """A stored message's text: its text blocks, one per line (a plain string as it is)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    texts = [b.get("text") for b in content if isinstance(b, dict) and isinstance(b.get("text"), str)]
    return "\n".join(t for t in texts if t)


def watermark(*, conversation_id: Any, agent_id: str, lock: bool = False) -> int:
    """The agent's watermark in the conversation (made at 0 on first use, by ``ON CONFLICT DO NOTHING``);
    ``lock``: its row locked until the transaction ends."""
    ExtractionWatermark.objects.bulk_create(
        [
            ExtractionWatermark(
                conversation_id=conversation_id, agent_id=agent_id, last_seq=0, updated_at=timezone.now()
            )
        ],
        ignore_conflicts=True,
    )
    rows = ExtractionWatermark.objects.filter(conversation_id=conversation_id, agent_id=agent_id)
    if lock:
        rows = rows.select_for_update()
    return rows.values_list("last_seq", flat=True).get()


def _claimed(agent_id: str) -> Exists:
    """A door extracted the (outer) message for this agent."""
    return Exists(
        ExtractedMessage.objects.filter(
            conversation_id=OuterRef("conversation_id"), agent_id=agent_id, position=OuterRef("position")
        )
    )


def uncovered(*, conversation_id: Any, agent_id: str, after: int) -> QuerySet[Message]:
    """The messages the agent may read past position ``after`` (its watermark, or further) that no door
    extracted for it, in position order."""
    return (
        Message.objects.filter(conversation_id=conversation_id, position__gt=after)
        .filter(readable(agent_id))
        .exclude(_claimed(agent_id))
        .order_by("position")
    )


def claimed_any(*, conversation_id: Any, agent_id: str, positions: Iterable[int]) -> bool:
    return ExtractedMessage.objects.filter(
        conversation_id=conversation_id, agent_id=agent_id, position__in=list(positions)
    ).exists()


def settle(*, conversation_id: Any, agent_id: str, mark: int) -> int:
    """Move the watermark (its row locked by the caller's transaction, at ``mark``) forward over the
    messages the agent may read that are covered from it on (a door extracted them) or hold no text, and
    forget the door's records it passed. Returns where it stands."""
    start = mark
    while True:
        rows = list(
            Message.objects.filter(conversation_id=conversation_id, position__gt=mark)
            .filter(readable(agent_id))
            .annotate(claimed=_claimed(agent_id))
            .order_by("position")
            .values_list("position", "claimed", "content")[:SETTLE_CHUNK]
        )
        for position, claimed, content in rows:
            if not (claimed or is_blank(message_text(content))):
                break
            mark = position
        else:
            if len(rows) == SETTLE_CHUNK:
                continue
        break
    if mark != start:
        ExtractionWatermark.objects.filter(conversation_id=conversation_id, agent_id=agent_id).update(
            last_seq=mark, updated_at=timezone.now()
        )
    ExtractedMessage.objects.filter(
        conversation_id=conversation_id, agent_id=agent_id, position__lte=mark
    ).delete()
    return mark


def claim(*, conversation_id: Any, agent_id: str, positions: Sequence[int]) -> None:
    """Record, in the transaction that writes their facts, that a door extracted the messages at
    ``positions`` for the agent, and move its watermark forward over them where it can (:func:`settle`).
    409 when one was covered meanwhile: its facts were written once already, so none of these are."""
    mark = watermark(conversation_id=conversation_id, agent_id=agent_id, lock=True)
    if any(p <= mark for p in positions) or claimed_any(
        conversation_id=conversation_id, agent_id=agent_id, positions=positions
    ):
        raise Conflict(
            "Some of these messages were extracted for this agent meanwhile (by the background run, or "
            "another call): nothing was written. Extract again: what is extracted is left out."
        )
    now = timezone.now()
    ExtractedMessage.objects.bulk_create(
        [
            ExtractedMessage(conversation_id=conversation_id, agent_id=agent_id, position=p, created_at=now)
            for p in sorted(set(positions))
        ],
        ignore_conflicts=True,
    )
    settle(conversation_id=conversation_id, agent_id=agent_id, mark=mark)


# --- What the extract door reads -----------------------------------------------------------------------


@dataclass(frozen=True)
class StoredMessage:
    """A stored message as extraction takes it: its id, role and text, its bound, when it was written and
    its position (what the watermark counts)."""

    message_id: str
    role: str
    text: str
    bound: Bound
    created_at: Any
    position: int


@dataclass
class Reading:
    """What a door's extraction reads of a conversation: the messages (of text), the positions it claims
    (every message read, those without text too), and the ids named that were extracted already."""

    messages: list[StoredMessage] = field(default_factory=list)
    positions: list[int] = field(default_factory=list)
    already: list[str] = field(default_factory=list)


def _stored(row: tuple[Any, ...], bound: Bound) -> StoredMessage:
    pk, position, channel, role, content, created_at = row
    message_bound = Bound(Visibility.SELF) if channel == Channel.MEMORY else bound
    return StoredMessage(str(pk), role, message_text(content).strip(), message_bound, created_at, position)


_COLUMNS = ("id", "position", "channel", "role", "content", "created_at")


def of_one_kind(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """``rows`` up to the first not of the first's kind (the memory channel, or the others): the memory
    channel goes to the model in calls of its own. Each row is ``(id, position, channel, ...)``."""
    private = rows[0][2] == Channel.MEMORY
    for index, row in enumerate(rows):
        if (row[2] == Channel.MEMORY) != private:
            return rows[:index]
    return rows


def read_stored(
    *,
    conversation: Conversation,
    agent: Agent,
    bound: Bound,
    limit: int,
    after_message_id: str | None = None,
    message_ids: Sequence[str] | None = None,
) -> Reading:
    """The stored messages a door extracts from: those named (``message_ids``, each one the agent may read
    here, else 400), or the first ``limit`` the agent may read past its watermark (and past
    ``after_message_id``) of one kind (the memory channel goes alone, as in the background). Covered ones
    are left out; named ones are listed in ``already``."""
    mark = watermark(conversation_id=conversation.pk, agent_id=agent.id)
    mine = Message.objects.filter(conversation=conversation).filter(readable(agent.id))
    if message_ids is not None:
        return _named(mine, conversation=conversation, agent=agent, bound=bound, ids=message_ids, mark=mark)
    after = mark
    if after_message_id is not None:
        pk = uuid_or_none(after_message_id)
        found = mine.filter(pk=pk).values_list("position", flat=True).first() if pk else None
        if found is None:
            raise BadRequest(f"afterMessageId: no such message in conversation '{conversation.pk}'.")
        after = max(after, found)
    rows = list(
        uncovered(conversation_id=conversation.pk, agent_id=agent.id, after=after).values_list(*_COLUMNS)[
            :limit
        ]
    )
    reading = Reading()
    for row in of_one_kind(rows) if rows else []:
        reading.positions.append(row[1])
        message = _stored(row, bound)
        if not is_blank(message.text):
            reading.messages.append(message)
    return reading


def _named(
    mine: QuerySet[Message],
    *,
    conversation: Conversation,
    agent: Agent,
    bound: Bound,
    ids: Sequence[str],
    mark: int,
) -> Reading:
    pks = [uuid_or_none(i) for i in ids]
    found = {str(row[0]): row for row in mine.filter(pk__in=[p for p in pks if p]).values_list(*_COLUMNS)}
    claimed = set(
        ExtractedMessage.objects.filter(conversation=conversation, agent=agent).values_list(
            "position", flat=True
        )
    )
    reading = Reading()
    for index, pk in enumerate(pks):
        row = found.get(str(pk)) if pk else None
        if row is None:
            raise BadRequest(f"messageIds[{index}]: no such message in conversation '{conversation.pk}'.")
        if row[1] <= mark or row[1] in claimed:
            reading.already.append(ids[index])
            continue
        reading.positions.append(row[1])
        message = _stored(row, bound)
        if not is_blank(message.text):
            reading.messages.append(message)
    reading.messages.sort(key=lambda m: m.position)
    return reading


@dataclass(frozen=True)
class NamedMessage:
    """A stored message a caller named by id in the messages it sends: who may read it (its channel and
    author), its position and time, and whether it is covered for the agent."""

    channel: str
    author: str | None
    position: int
    created_at: Any
    covered: bool


def named_messages(
    *, conversation: Conversation, agent_id: str, ids: Iterable[str]
) -> dict[str, NamedMessage]:
    """The stored messages of the conversation these ids name (each id as given), with whether each is
    covered for the agent (extracted already)."""
    mark = watermark(conversation_id=conversation.pk, agent_id=agent_id)
    pks = {i: uuid_or_none(i) for i in ids}
    rows = (
        Message.objects.filter(conversation=conversation, pk__in=[p for p in pks.values() if p])
        .annotate(claimed=_claimed(agent_id))
        .values_list("pk", "channel", "agent_id", "position", "created_at", "claimed")
    )
    found = {
        str(pk): NamedMessage(channel, author, position, created, claimed or position <= mark)
        for pk, channel, author, position, created, claimed in rows
    }
    return {i: found[str(p)] for i, p in pks.items() if p and str(p) in found}
