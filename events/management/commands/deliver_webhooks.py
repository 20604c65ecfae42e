"""``manage.py deliver_webhooks``: deliver every due subscription's events now (``--follow``: again and
again), without a Celery worker. The service is the tasks' (:func:`events.services.webhook_deliver`)."""

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from events import selectors, services


class Command(BaseCommand):
    help = "Deliver the webhook subscriptions' pending events (--follow: keep delivering)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--follow", action="store_true", help="Keep delivering, every --interval s.")
        parser.add_argument("--interval", type=float, default=1.0, help="Seconds between sweeps (--follow).")

    def handle(self, *args: Any, follow: bool, interval: float, **options: Any) -> None:
        while True:
            delivered = 0
            for subscription_id in selectors.webhook_due_ids():
                while True:
                    report = services.webhook_deliver(subscription_id=subscription_id)
                    delivered += report.delivered
                    if not report.more:
                        break
            if not follow:
                self.stdout.write(f"{delivered} events delivered")
                return
            if not delivered:
                time.sleep(interval)
