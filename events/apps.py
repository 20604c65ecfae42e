from django.apps import AppConfig


class EventsConfig(AppConfig):
    name = "events"
    verbose_name = "Events and webhooks"

    def ready(self) -> None:
        from events import nudge, services
        from usermemory.services import register_history_listener, register_user_data

        # GDPR erasure removes the user's events (and their values) with the rest of their data; the erasure's
        # own history event then becomes the one ``user.erased`` event (the outbox trigger).
        register_user_data("events", eraser=services.event_erase_user, exporter=services.event_export_user)
        # History's rows become events (the outbox trigger): their commit nudges the deliveries.
        register_history_listener(nudge.nudger.request)
        # The webhook deliveries' sweep (events/tasks.py): what an event's own nudge missed.
        from django.conf import settings

        from memoryplatform.schedules import Schedule, schedule_register

        schedule_register(
            Schedule(
                name="webhooks-sweep",
                task="webhooks.deliver_due",
                description="Deliver every due webhook subscription's pending events "
                "(WEBHOOKS_SWEEP_INTERVAL).",
                every_seconds=lambda: settings.WEBHOOKS_SWEEP_INTERVAL,
            )
        )
        # The events' retention (EVENTS_RETENTION_DAYS): hourly, off when it keeps every event.
        schedule_register(
            Schedule(
                name="events-prune",
                task="events.prune",
                description="Delete the events older than EVENTS_RETENTION_DAYS, with their delivery "
                "attempts.",
                every_seconds=lambda: 3600,
                enabled=lambda: settings.EVENTS_RETENTION_DAYS > 0,
            )
        )
