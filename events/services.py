"""The events app's writes: events that no history row reports (an extraction's, a Dream run's), webhook
subscriptions (admin keys over REST, staff in the admin), their deliveries, a user's erasure, and the
events' retention.

Memory events need no call here: history's inserts fire the outbox trigger (migration 0002), in the
transaction of the change.
"""

import logging
import secrets
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit
from uuid import UUID

import orjson
from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from apikeys.caller import Caller
from apikeys.models import Agent
from events import delivery, nudge, store
from events.models import DeliveryAttempt, Event, EventType, WebhookSubscription
from events.payload import event_payload
from memoryplatform import publicids
from memoryplatform.batches import delete_in_batches
from memoryplatform.errors import BadRequest, Forbidden, NotFound
from memoryplatform.locks import LockId, advisory_session_try_lock, advisory_session_unlock
from usermemory.models import Visibility

logger = logging.getLogger(__name__)

EVENT_TYPES = tuple(EventType.values)


def event_record(
    *,
    type: str,
    user_id: str,
    data: dict[str, Any],
    owner: str = "",
    visibility: str = Visibility.SELF,
    group_ids: list[str] | None = None,
    at: datetime | None = None,
) -> Event:
    """An event that no history row reports (an extraction wrote, a Dream run ended), in the caller's
    transaction (its commit nudges the deliveries). ``owner``/``visibility``/``group_ids`` say who may see
    it, as an entry's do."""
    scope = {"owner": owner, "visibility": visibility, "group_ids": group_ids or []}
    nudge.nudge_on_commit()
    return Event.objects.create(
        type=type,
        user_id=user_id,
        occurred_at=at or timezone.now(),
        data=data,
        old_visibility=visibility,
        old_group_ids=scope["group_ids"],
        **scope,
    )


def event_erase_user(user_id: str) -> dict[str, int]:
    """GDPR erasure: the user's events, with their values (their delivery attempts go with them)."""
    deleted, _ = Event.objects.filter(user_id=user_id).delete()
    return {"eventsDeleted": deleted}


PRUNE_BATCH = 2000
"""Events deleted per transaction by :func:`event_prune`: short transactions, beside the writers."""


def event_prune() -> int:
    """Delete the events older than EVENTS_RETENTION_DAYS (none when it is 0), with their delivery attempts,
    oldest first, :data:`PRUNE_BATCH` a transaction; return how many went. Two runs at once delete each event
    once (the second finds it gone)."""
    days = settings.EVENTS_RETENTION_DAYS
    if days <= 0:
        return 0
    cutoff = timezone.now() - timedelta(days=days)
    expired = Event.objects.filter(occurred_at__lt=cutoff)
    # Each batch raises the mark in its own transaction, before it deletes: no reader passes a deleted event
    # unwarned (the feed's cursor_expired, a subscription disabled saying so).
    return delete_in_batches(
        expired,
        batch_size=PRUNE_BATCH,
        order_by="occurred_at",
        before_delete=lambda ids: store.prune_mark_raise(event_ids=ids),
    )


def event_export_user(user_id: str) -> dict[str, Any]:
    """GDPR export: the user's events by id, type and time (their values are history's, exported there)."""
    rows = (
        Event.objects.filter(user_id=user_id).order_by("txid", "id").values_list("id", "type", "occurred_at")
    )
    return {
        "events": [
            {"id": publicids.public_str(publicids.CHANGE, pk), "type": kind, "occurredAt": at.isoformat()}
            for pk, kind, at in rows
        ]
    }


# --- Subscriptions --------------------------------------------------------------------------------------


def _admin(caller: Caller) -> None:
    if not caller.is_admin:
        raise Forbidden("Webhooks are managed with an admin key.")


def webhook_check_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BadRequest("A webhook URL is http:// or https:// with a host.", details={"field": "url"})
    if parts.username or parts.password:
        raise BadRequest("A webhook URL holds no user or password.", details={"field": "url"})
    try:
        delivery.resolve(url, allow_private=settings.WEBHOOK_ALLOW_PRIVATE)
    except delivery.AddressRefused as exc:
        raise BadRequest(str(exc), details={"field": "url"}) from exc
    return url


def _checked_types(event_types: list[str]) -> list[str]:
    unknown = sorted(set(event_types) - set(EVENT_TYPES))
    if unknown:
        raise BadRequest(
            f"Unknown event types: {', '.join(unknown)}.",
            details={"field": "eventTypes", "known": EVENT_TYPES},
        )
    return sorted(set(event_types))


def new_secret() -> str:
    return "whsec_" + secrets.token_urlsafe(32)


@dataclass(frozen=True)
class CreatedSubscription:
    """A subscription and its new secret (made, or rotated), which no answer shows again."""

    subscription: WebhookSubscription
    secret: str


def webhook_create(
    *, caller: Caller, url: str, agent_id: str, event_types: list[str], description: str = ""
) -> CreatedSubscription:
    """A subscription to the events ``agent_id`` may read, from now on. Admin only."""
    _admin(caller)
    if not Agent.objects.filter(pk=agent_id).exists():
        raise BadRequest(f"No agent {agent_id!r}.", details={"field": "agentId"})
    txid, event_id = store.start_position()
    subscription = WebhookSubscription.objects.create(
        url=webhook_check_url(url),
        agent_id=agent_id,
        event_types=_checked_types(event_types),
        description=description,
        secret=new_secret(),
        cursor_txid=txid,
        cursor_id=event_id,
    )
    return CreatedSubscription(subscription, subscription.secret)


MAX_PREVIOUS_SECRET_SECONDS = 7 * 24 * 3600
"""The longest a rotated-out secret may go on signing beside the new one: a week."""


def signing_secrets(subscription: WebhookSubscription, *, at: datetime) -> list[str]:
    """The secrets a delivery at ``at`` is signed with: the current one, and the previous one until it
    ends."""
    until = subscription.previous_secret_until
    if subscription.previous_secret and until is not None and at < until:
        return [subscription.secret, subscription.previous_secret]
    return [subscription.secret]


def webhook_rotate_secret(
    *, caller: Caller, subscription_id: UUID, previous_valid_seconds: int
) -> CreatedSubscription:
    """A new signing secret, shown this once. The one it replaces goes on signing every delivery beside it
    for ``previous_valid_seconds`` (0: it stops at once), so a receiver can move to the new one without a
    delivery it refuses. Admin only."""
    _admin(caller)
    if not 0 <= previous_valid_seconds <= MAX_PREVIOUS_SECRET_SECONDS:
        raise BadRequest(
            f"previousSecretValidSeconds is 0 to {MAX_PREVIOUS_SECRET_SECONDS} (a week).",
            details={"field": "previousSecretValidSeconds"},
        )
    with transaction.atomic():
        subscription = WebhookSubscription.objects.select_for_update().filter(pk=subscription_id).first()
        if subscription is None:
            raise NotFound("No such webhook.")
        keep = previous_valid_seconds > 0
        subscription.previous_secret = subscription.secret if keep else ""
        subscription.previous_secret_until = (
            timezone.now() + timedelta(seconds=previous_valid_seconds) if keep else None
        )
        subscription.secret = new_secret()
        subscription.save(update_fields=["secret", "previous_secret", "previous_secret_until"])
    return CreatedSubscription(subscription, subscription.secret)


def webhook_update(
    *,
    caller: Caller,
    subscription_id: UUID,
    url: str | None = None,
    event_types: list[str] | None = None,
    description: str | None = None,
    enabled: bool | None = None,
) -> WebhookSubscription:
    """Change a subscription; enabling it again clears its failures, and it resumes where it stopped."""
    _admin(caller)
    with transaction.atomic():
        subscription = WebhookSubscription.objects.select_for_update().filter(pk=subscription_id).first()
        if subscription is None:
            raise NotFound("No such webhook.")
        if url is not None:
            subscription.url = webhook_check_url(url)
        if event_types is not None:
            subscription.event_types = _checked_types(event_types)
        if description is not None:
            subscription.description = description
        if enabled is not None and enabled != subscription.enabled:
            subscription.enabled = enabled
            subscription.failures = 0
            subscription.next_attempt_at = None
            if enabled:
                _past_the_deleted(subscription)
                nudge.deliver_on_commit(str(subscription.pk))
            subscription.disabled_reason = "" if enabled else "disabled by an admin"
        subscription.save()
    return subscription


def _past_the_deleted(subscription: WebhookSubscription) -> None:
    """A subscription disabled because events it had not received were deleted (its reason says so: staff
    were told) goes on past them when enabled again: its position moves to the retention's mark. Any other
    keeps its position: if it fell behind the mark while disabled, its next delivery disables it, saying
    so."""
    if subscription.disabled_reason != BEHIND_THE_RETENTION:
        return
    mark = store.prune_mark()
    if (subscription.cursor_txid, subscription.cursor_id) < mark:
        subscription.cursor_txid, subscription.cursor_id = mark


BEHIND_THE_RETENTION = (
    "events after its position were deleted by the retention (EVENTS_RETENTION_DAYS) before it received "
    "them; enabled again, it goes on from the oldest event kept"
)


def webhook_delete(*, caller: Caller, subscription_id: UUID) -> None:
    _admin(caller)
    deleted, _ = WebhookSubscription.objects.filter(pk=subscription_id).delete()
    if not deleted:
        raise NotFound("No such webhook.")


@transaction.atomic
def webhook_send_again(*, subscription_id: UUID) -> None:
    """Staff's "send again": enable the subscription, clear its failures, and try its next event now (a
    delivery task, once this commits); past the events the retention deleted, if it was behind them."""
    subscription = WebhookSubscription.objects.select_for_update().filter(pk=subscription_id).first()
    if subscription is None:
        return
    _past_the_deleted(subscription)
    subscription.enabled, subscription.failures = True, 0
    subscription.next_attempt_at, subscription.disabled_reason = None, ""
    subscription.save(
        update_fields=[
            "enabled",
            "failures",
            "next_attempt_at",
            "disabled_reason",
            "cursor_txid",
            "cursor_id",
        ]
    )
    nudge.deliver_on_commit(str(subscription_id))


# --- Deliveries -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DeliveryReport:
    """What one delivery run did: events delivered, whether more wait (``more``), or when to try again;
    ``position``, the subscription's position after a run that went through its events (``None``: it
    stopped early, or did not run)."""

    delivered: int = 0
    more: bool = False
    retry_in: float | None = None
    busy: bool = False
    position: tuple[int, int] | None = None


def _backoff(failures: int) -> float:
    return float(settings.WEBHOOK_RETRY_BASE_SECONDS * 2 ** (failures - 1))


def _record(subscription: WebhookSubscription, event: Event, answer: delivery.Answer, at: datetime) -> None:
    DeliveryAttempt.objects.create(
        subscription=subscription,
        event=event,
        attempted_at=at,
        succeeded=answer.ok,
        status=answer.status,
        answer=answer.text[:500],
        error=answer.error[:200],
        duration_ms=answer.duration_ms,
    )


def _delivered(
    subscription: WebhookSubscription, event: Event, answer: delivery.Answer, at: datetime
) -> bool:
    """Move the subscription past ``event`` (compare-and-set on its position); ``False`` if it moved
    meanwhile (changed or deleted), and the run stops."""
    moved = WebhookSubscription.objects.filter(
        pk=subscription.pk, cursor_txid=subscription.cursor_txid, cursor_id=subscription.cursor_id
    ).update(
        cursor_txid=event.txid,
        cursor_id=event.pk,
        failures=0,
        next_attempt_at=None,
        last_attempt_at=at,
        last_status=answer.status,
        last_answer=answer.text[:500],
        delivered=F("delivered") + 1,
    )
    subscription.cursor_txid, subscription.cursor_id = event.txid, event.pk
    return moved == 1


def _moved_past(subscription: WebhookSubscription, position: tuple[int, int] | None) -> bool:
    """Move the subscription past the events its read scanned but may not send it (another agent's, a type
    it did not ask for), so that the next read starts after them (compare-and-set, as :func:`_delivered`);
    ``False`` if it moved meanwhile."""
    if position is None or position == (subscription.cursor_txid, subscription.cursor_id):
        return True
    moved = WebhookSubscription.objects.filter(
        pk=subscription.pk, cursor_txid=subscription.cursor_txid, cursor_id=subscription.cursor_id
    ).update(cursor_txid=position[0], cursor_id=position[1])
    subscription.cursor_txid, subscription.cursor_id = position
    return moved == 1


def _behind_the_retention(subscription: WebhookSubscription) -> None:
    """Disable a subscription some of whose events were deleted before it received them, saying so: its
    receiver has a gap, which staff hear of, rather than one it never learns of."""
    disabled = WebhookSubscription.objects.filter(
        pk=subscription.pk,
        enabled=True,
        cursor_txid=subscription.cursor_txid,
        cursor_id=subscription.cursor_id,
    ).update(enabled=False, disabled_reason=BEHIND_THE_RETENTION)
    if disabled:
        logger.warning("Webhook %s disabled: events it had not received were deleted", subscription.pk)


def _failed(subscription: WebhookSubscription, answer: delivery.Answer, at: datetime) -> float | None:
    """Count a failed try; disable the subscription after the last. The pause before the next, if any."""
    failures = subscription.failures + 1
    last = failures >= settings.WEBHOOK_MAX_ATTEMPTS
    pause = None if last else _backoff(failures)
    WebhookSubscription.objects.filter(pk=subscription.pk).update(
        failures=failures,
        enabled=not last,
        disabled_reason=f"{failures} failed tries of one event" if last else "",
        next_attempt_at=None if pause is None else at + timedelta(seconds=pause),
        last_attempt_at=at,
        last_status=answer.status,
        last_answer=(answer.text or answer.error)[:500],
    )
    if last:
        logger.warning("Webhook %s disabled after %s failed tries", subscription.pk, failures)
    return pause


def webhook_deliver(*, subscription_id: UUID | str, max_events: int = 100) -> DeliveryReport:
    """Deliver a subscription's next events, in order, one request each, until one fails or ``max_events``
    went. Outside any transaction: each delivered event moves the subscription's position in its own
    commit, after the receiver's 2xx, so a process that dies between the two sends that event again (at
    least once; the receiver drops it by its ``Webhook-Id``). One run per subscription at a time (a session
    advisory lock, released if the process dies; a run that finds it held goes away).

    A run that went through its events looks once more after it let the lock go: a run asked for by a
    commit while this one held the lock went away, and the events of that commit are this one's to hand on
    (``more``), or they would wait for beat's sweep."""
    key = str(subscription_id)
    if not advisory_session_try_lock(LockId.WEBHOOK, key):
        return DeliveryReport(busy=True)
    try:
        report = _deliver(key, max_events=max_events)
    finally:
        advisory_session_unlock(LockId.WEBHOOK, key)
    if report.position is None or report.more:
        return report
    txid, event_id = report.position
    return replace(report, more=store.events_exist_after(txid=txid, event_id=event_id))


def _deliver(subscription_id: str, *, max_events: int) -> DeliveryReport:
    subscription = WebhookSubscription.objects.filter(pk=subscription_id, enabled=True).first()
    if subscription is None:
        return DeliveryReport()
    if store.before_prune_mark(subscription.cursor_txid, subscription.cursor_id):
        _behind_the_retention(subscription)
        return DeliveryReport()
    now = timezone.now()
    if subscription.next_attempt_at is not None and subscription.next_attempt_at > now:
        return DeliveryReport(retry_in=(subscription.next_attempt_at - now).total_seconds())
    read = store.events_after(
        agent_id=subscription.agent_id,
        types=subscription.event_types,
        txid=subscription.cursor_txid,
        event_id=subscription.cursor_id,
        limit=max_events,
    )
    delivered = 0
    for seen in read.events:
        body = orjson.dumps(event_payload(seen))
        answer = delivery.post(
            subscription.url,
            body=body,
            event_id=publicids.public_str(publicids.CHANGE, seen.event.pk) or "",
            secrets=signing_secrets(subscription, at=now),
            timeout=settings.WEBHOOK_TIMEOUT,
            allow_private=settings.WEBHOOK_ALLOW_PRIVATE,
        )
        at = timezone.now()
        with transaction.atomic():  # the attempt and the position it moves: one commit
            _record(subscription, seen.event, answer, at)
            if not answer.ok:
                return DeliveryReport(delivered=delivered, retry_in=_failed(subscription, answer, at))
            if not _delivered(subscription, seen.event, answer, at):
                return DeliveryReport(delivered=delivered)
        delivered += 1
    if not _moved_past(subscription, read.position):
        return DeliveryReport(delivered=delivered)
    position = (subscription.cursor_txid, subscription.cursor_id)
    return DeliveryReport(delivered=delivered, more=read.more, position=position)
