from typing import Any

from django.apps import AppConfig
from django.db.models.signals import post_migrate


class MemoryplatformConfig(AppConfig):
    name = "memoryplatform"
    verbose_name = "memoryplatform"

    def ready(self) -> None:
        from django.conf import settings

        from memoryplatform import checks  # noqa: F401  (registers the system checks)
        from memoryplatform.schedules import Schedule, schedule_register

        # beat's schedules are seeded after each migrate, once every app's migrations ran.
        post_migrate.connect(_seed_schedules, sender=self, dispatch_uid="memoryplatform-schedules")
        # The vector queue's sweep: what a write's nudge missed.
        schedule_register(
            Schedule(
                name="vectors-sweep",
                task="vectors.drain",
                description="Embed what the vector queue holds that no write's nudge reached "
                "(EMBEDDINGS_SWEEP_INTERVAL).",
                every_seconds=lambda: settings.EMBEDDINGS_SWEEP_INTERVAL,
                enabled=lambda: settings.EMBEDDINGS_PROVIDER != "none",
            )
        )
        # The PostgreSQL broker keeps what it delivered: an hourly prune (nothing to do on Redis).
        schedule_register(
            Schedule(
                name="broker-prune",
                task="housekeeping.prune_broker",
                description="Delete the PostgreSQL broker's delivered messages older than an hour.",
                every_seconds=lambda: 3600,
            )
        )


def _seed_schedules(sender: AppConfig, **kwargs: Any) -> None:
    from memoryplatform.schedules import schedules_seed

    schedules_seed()
