"""beat's schedule, in the database (django-celery-beat): each app registers the periodic tasks it owns (its
``AppConfig.ready``), and :func:`schedules_seed` writes the ones missing, after every migrate (the kernel's
post_migrate handler, memoryplatform/apps.py).

The settings seed a schedule once (``DREAM_SCHEDULE``, ``EMBEDDINGS_SWEEP_INTERVAL``, ...); from then on it is
the admin's (Periodic tasks): staff see it, change it, turn it off, and a later migrate leaves it as they set
it. A schedule whose job cannot run here (no embedder, no LLM) is seeded turned off.
"""

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import transaction
from django_celery_beat.models import CrontabSchedule, IntervalSchedule, PeriodicTask


@dataclass(frozen=True)
class Schedule:
    """A periodic task as the settings first give it: a crontab (5 fields) or every so many seconds."""

    name: str
    task: str
    description: str
    crontab: Callable[[], str] | None = None
    every_seconds: Callable[[], int] | None = None
    enabled: Callable[[], bool] = lambda: True
    kwargs: dict[str, Any] = field(default_factory=dict)


_SCHEDULES: dict[str, Schedule] = {}


def schedule_register(schedule: Schedule) -> None:
    """Add a periodic task to what :func:`schedules_seed` writes (its app's ``ready``)."""
    _SCHEDULES.setdefault(schedule.name, schedule)


def registered_schedules() -> list[Schedule]:
    return list(_SCHEDULES.values())


@transaction.atomic
def schedule_seed(schedule: Schedule) -> bool:
    """Write ``schedule``'s row unless one of its name exists (the unique name decides, never a read first);
    returns whether it was written."""
    every = schedule.every_seconds() if schedule.every_seconds else 0
    enabled = schedule.enabled() and (schedule.crontab is not None or every > 0)
    when: dict[str, Any] = {}
    if schedule.crontab is not None:
        minute, hour, day_of_month, month_of_year, day_of_week = schedule.crontab().split()
        when["crontab"], _ = CrontabSchedule.objects.get_or_create(
            minute=minute,
            hour=hour,
            day_of_month=day_of_month,
            month_of_year=month_of_year,
            day_of_week=day_of_week,
            timezone=settings.TIME_ZONE,
        )
    else:
        when["interval"], _ = IntervalSchedule.objects.get_or_create(
            every=max(every, 1), period=IntervalSchedule.SECONDS
        )
        when["expire_seconds"] = max(int(every * 0.9), 1)  # never two sweeps waiting in a queue
    _, created = PeriodicTask.objects.get_or_create(
        name=schedule.name,
        defaults={
            "task": schedule.task,
            "kwargs": json.dumps(schedule.kwargs),
            "description": schedule.description,
            "enabled": enabled,
            **when,
        },
    )
    return created


def schedules_seed() -> list[str]:
    """Seed every registered schedule that has no row yet; returns the names written."""
    return [schedule.name for schedule in registered_schedules() if schedule_seed(schedule)]
