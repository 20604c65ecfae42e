"""``manage.py deliver_webhooks``: deliver every due subscription's pending events now, in this process, and
end (an operator's catch-up after fixing a receiver, or a look at what a delivery does, with no worker). The
deliveries themselves are the Celery tasks' (events/tasks.py): an event's commit nudges them, beat sweeps.
The service is the tasks' (:func:`events.services.webhook_deliver`)."""

from typing import Any

from django.core.management.base import BaseCommand

from events import selectors, services


class Command(BaseCommand):
    help = "Deliver the webhook subscriptions' pending events now, once (Celery's tasks deliver them anyway)."

    def handle(self, *args: Any, **options: Any) -> None:
        delivered = 0
        for subscription_id in selectors.webhook_due_ids():
            while True:
                report = services.webhook_deliver(subscription_id=subscription_id)
                delivered += report.delivered
                if not report.more:
                    break
        self.stdout.write(f"{delivered} events delivered")
