"""Webhook deliveries and the events' retention as Celery tasks: each takes plain values and calls a
service."""

from celery import shared_task

from events import selectors, services


@shared_task(name="webhooks.deliver", time_limit=600, soft_time_limit=570, ignore_result=True)
def webhook_deliver(subscription_id: str) -> None:
    """Deliver one subscription's next events; come back when it has more, or after a failure's pause."""
    report = services.webhook_deliver(subscription_id=subscription_id)
    if report.more:
        webhook_deliver.delay(subscription_id)
    elif report.retry_in is not None:
        webhook_deliver.apply_async((subscription_id,), countdown=report.retry_in)


@shared_task(name="webhooks.deliver_due", time_limit=60, soft_time_limit=50, ignore_result=True)
def webhooks_deliver_due() -> None:
    """The periodic sweep: a delivery task for every enabled subscription not pausing after a failure. A
    subscription whose delivery runs already skips (its lock), so a sweep never doubles one."""
    for subscription_id in selectors.webhook_due_ids():
        webhook_deliver.delay(subscription_id)


@shared_task(name="events.prune", time_limit=3600, soft_time_limit=3300, ignore_result=True)
def events_prune() -> int:
    """beat's ``events-prune``: the events past EVENTS_RETENTION_DAYS deleted, with their attempts."""
    return services.event_prune()
