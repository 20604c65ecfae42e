"""When a Celery crontab fires: what both ways of running the schedule need, beat (``config/celery.py``, which
gives a scheduled cycle its expiry) and the embedded scheduler (``dream_scheduler``, which sleeps until the
next firing)."""

from datetime import datetime, timedelta

from celery.schedules import crontab


def crontab_next_after(schedule: crontab, moment: datetime) -> datetime:
    """The first time after ``moment`` that ``schedule`` fires (minute resolution)."""
    probe = crontab(
        minute=schedule.minute,  # type: ignore[attr-defined]  # not in celery-types
        hour=schedule.hour,  # type: ignore[attr-defined]  # not in celery-types
        day_of_week=schedule.day_of_week,  # type: ignore[attr-defined]  # not in celery-types
        day_of_month=schedule.day_of_month,  # type: ignore[attr-defined]  # not in celery-types
        month_of_year=schedule.month_of_year,  # type: ignore[attr-defined]  # not in celery-types
        nowfun=lambda: moment,
        app=schedule.app,
    )
    return moment + probe.remaining_estimate(moment)


def crontab_min_period(schedule: crontab, *, samples: int = 16) -> float:
    """The shortest gap, in seconds, between the next ``samples`` firings of ``schedule``."""
    moment = schedule.now()
    firings = []
    for _ in range(samples):
        moment = crontab_next_after(schedule, moment)
        firings.append(moment)
        moment += timedelta(seconds=1)
    return min(
        (later - earlier).total_seconds() for earlier, later in zip(firings, firings[1:], strict=False)
    )
