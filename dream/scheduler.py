"""The scheduler's loop: runs a job on a schedule (Dream's cycle on DREAM_SCHEDULE, the re-embedding and the
background extraction every so many seconds), in ``manage.py dream_scheduler``, the one process that runs the
platform's background work (docs/background.md). ``manage.py serve`` starts it beside the web server (so it
runs once, not once per web worker), and it stops when that parent goes away; a deployment runs it as a
service of its own.

A Dream cycle can also be asked for at once (the admin's "Run Dream now"): :func:`dream_request_cycle`
notifies :data:`DREAM_CHANNEL` as the request's transaction commits, and the loop, waiting on that channel
between firings, runs it.
"""

import logging
from collections.abc import Callable
from datetime import datetime

from croniter import croniter
from django.utils import timezone

from memoryplatform import listen
from memoryplatform.logsafe import safe_traceback

logger = logging.getLogger(__name__)

DREAM_CHANNEL = "memoryplatform_dream"
DREAM_LISTENER = "memoryplatform-dream"  # the scheduler's listening connection (its application_name)


def cron_next_after(spec: str, moment: datetime) -> datetime:
    """The first firing of the crontab ``spec`` after ``moment``, in the server's TIME_ZONE (minute
    resolution)."""
    following: datetime = croniter(spec, timezone.localtime(moment)).get_next(datetime)
    return following


def dream_schedule_loop(
    *,
    next_after: Callable[[datetime], datetime],
    now: Callable[[], datetime],
    wait: Callable[[float], bool],
    should_stop: Callable[[], bool],
    run_cycle: Callable[[bool], object],
    run_first: bool = False,
    poll_seconds: float = 1.0,
    what: str = "Dream cycle",
) -> int:
    """Call ``run_cycle(False)`` at every firing of the schedule until ``should_stop()``; return the number of
    runs started. ``wait(seconds)`` waits at most that long and says whether a run was asked for meanwhile:
    ``run_cycle(True)`` then runs at once, and the schedule keeps its next firing. A failed run is logged
    (a cycle's run is recorded ``failed``) and the loop goes on. Waits at most ``poll_seconds`` at a time, so
    a stop request is noticed quickly. ``what`` names the job in the log."""
    due = now() if run_first else next_after(now())
    started = 0
    while not should_stop():
        current = now()
        asked = False
        if current < due:
            asked = wait(min(poll_seconds, (due - current).total_seconds()))
            if not asked:
                continue
        started += 1
        try:
            run_cycle(asked)
        except Exception as exc:
            logger.error("Scheduled %s failed\n%s", what, safe_traceback(exc))
        if not asked:
            due = next_after(max(now(), due))
    return started


def dream_request_cycle() -> bool:
    """Ask the scheduler for a Dream cycle now (the admin's "Run Dream now"): a notification sent as the
    current transaction commits. Returns whether a scheduler listens (if none does, nothing will run it)."""
    listen.notify(DREAM_CHANNEL, "admin")
    return listen.listeners(DREAM_LISTENER) > 0
