"""An event's commit nudges its delivery: once the transaction that wrote events commits (history's, through
usermemory's listener; an extraction's or a Dream run's, :func:`events.services.event_record`), the sweep
``webhooks.deliver_due`` is enqueued, and it sends a delivery task for every due subscription. At most one
nudge per window per process (:class:`memoryplatform.nudge.Nudger`): one sweep covers every event committed
before it reads. beat's ``webhooks-sweep`` catches a nudge that never reached a broker.
"""

import logging

from django.db import transaction

from memoryplatform.broker import enqueue_once
from memoryplatform.nudge import Nudger

logger = logging.getLogger(__name__)


def _enqueue() -> None:
    from events.tasks import webhooks_deliver_due

    enqueue_once(webhooks_deliver_due)


nudger = Nudger(_enqueue, what="the webhook deliveries")
nudge_on_commit = nudger.on_commit


def deliver_on_commit(subscription_id: str) -> None:
    """Enqueue one subscription's ``webhooks.deliver`` once the current transaction commits (staff's "send
    again", an admin's enabling it again); a broker that does not answer leaves it to beat's sweep."""

    def enqueue() -> None:
        from events.tasks import webhook_deliver

        try:
            enqueue_once(webhook_deliver, (subscription_id,))
        except Exception as exc:  # the broker: the change stands, the sweep delivers
            logger.warning("Could not enqueue webhook %s (%s)", subscription_id, type(exc).__name__)

    transaction.on_commit(enqueue, robust=True)
