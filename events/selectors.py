"""The events app's reads: the change feed a key may read (:func:`event_feed`), the webhook subscriptions,
and the subscriptions with events to deliver."""

from dataclasses import dataclass
from typing import Any
from uuid import UUID

from django.db.models import Q, QuerySet
from django.utils import timezone

from apikeys.caller import Caller
from events import store
from events.models import DeliveryAttempt, WebhookSubscription
from events.payload import event_payload
from memoryplatform import publicids
from memoryplatform.errors import BadRequest, CursorExpired, Forbidden, NotFound

DEFAULT_FEED_PAGE = 100
MAX_FEED_PAGE = 500


@dataclass(frozen=True)
class FeedPage:
    """Events oldest first, and the cursor after the last event scanned, shown or not (the one given, when
    none was)."""

    events: list[dict[str, Any]]
    next: str


def cursor_of(txid: int, event_id: int) -> str:
    """A feed position as an opaque cursor: both numbers as public ids, so it tells nothing of row counts."""
    if txid == 0 and event_id == 0:
        return "0"
    return f"{publicids.to_public(publicids.CHANGE, txid)}.{publicids.to_public(publicids.CHANGE, event_id)}"


def _number(text: str) -> int | None:
    if not (text.isascii() and text.isdigit() and len(text) <= 16) or int(text) < publicids.PUBLIC_BASE:
        return None  # a cursor holds public ids only, never a legacy (internal) number
    return publicids.to_internal(publicids.CHANGE, int(text))


def position_of(cursor: str | None) -> tuple[int, int]:
    """The position a cursor names; none or ``"0"``: the beginning."""
    if cursor in (None, "", "0"):
        return 0, 0
    txid_text, _, id_text = str(cursor).partition(".")
    txid, event_id = _number(txid_text), _number(id_text)
    if txid is None or event_id is None:
        raise BadRequest("Not a cursor this feed gave.", details={"field": "after"})
    return txid, event_id


def event_feed(*, caller: Caller, after: str | None, types: list[str], limit: int) -> FeedPage:
    """The events the caller may read after ``after``, oldest first: an agent key's by the visibility rules
    of every read (values it may not see are ``null``), a viewer's or an admin's all of them. A cursor from
    before events the retention deleted is refused (:class:`CursorExpired`): its reader may have missed
    some, and says so rather than going on without them."""
    txid, event_id = position_of(after)
    if store.before_prune_mark(txid, event_id):
        raise CursorExpired(
            "Events after this cursor were deleted: they were older than the events' retention "
            "(EVENTS_RETENTION_DAYS), and this reader may have missed some. Read again without `after` to "
            "start at the oldest event kept.",
            details={"field": "after"},
        )
    agent_id = caller.agent_id if caller.is_agent else None
    read = store.events_after(agent_id=agent_id, types=types, txid=txid, event_id=event_id, limit=limit)
    if read.position is not None:  # past the events it scanned, those it may not see too
        txid, event_id = read.position
    return FeedPage([event_payload(s) for s in read.events], cursor_of(txid, event_id))


def _admin(caller: Caller) -> None:
    if not caller.is_admin:
        raise Forbidden("Webhooks are managed with an admin key.")


def webhook_list(*, caller: Caller) -> QuerySet[WebhookSubscription]:
    _admin(caller)
    return WebhookSubscription.objects.order_by("created_at", "id")


def webhook_get(*, caller: Caller, subscription_id: UUID) -> WebhookSubscription:
    _admin(caller)
    subscription = WebhookSubscription.objects.filter(pk=subscription_id).first()
    if subscription is None:
        raise NotFound("No such webhook.")
    return subscription


def webhook_due_ids() -> list[str]:
    """The enabled subscriptions whose pause after a failure, if any, is over."""
    due = Q(next_attempt_at__isnull=True) | Q(next_attempt_at__lte=timezone.now())
    return [
        str(pk) for pk in WebhookSubscription.objects.filter(due, enabled=True).values_list("pk", flat=True)
    ]


def webhook_attempts(*, subscription_id: UUID, limit: int = 50) -> QuerySet[DeliveryAttempt]:
    return DeliveryAttempt.objects.filter(subscription_id=subscription_id).order_by("-attempted_at", "-id")[
        :limit
    ]
