"""The embedded Dream scheduler: runs the cycle on DREAM_SCHEDULE without Celery beat or Redis.

``manage.py serve`` starts it as one child process beside the web server (so it runs once, not once per web
worker), and it stops when that parent goes away. The same process runs the background re-embedding of
entry vectors (usermemory.embedding.memory_reembed_scheduled) on a thread of its own, every
EMBEDDINGS_REEMBED_INTERVAL seconds. Production uses Celery beat instead.
"""

import logging
from collections.abc import Callable
from datetime import datetime

from memoryplatform.logsafe import safe_traceback

logger = logging.getLogger(__name__)


def dream_schedule_loop(
    *,
    next_after: Callable[[datetime], datetime],
    now: Callable[[], datetime],
    sleep: Callable[[float], None],
    should_stop: Callable[[], bool],
    run_cycle: Callable[[], object],
    run_first: bool = False,
    poll_seconds: float = 1.0,
    what: str = "Dream cycle",
) -> int:
    """Call ``run_cycle`` at every firing of the schedule until ``should_stop()``; return the number of
    cycles started. A failed cycle is logged (its run is recorded ``failed``) and the loop goes on.
    Sleeps at most ``poll_seconds`` at a time, so a stop request is noticed quickly. ``what`` names the job
    in the log (the scheduler process also runs the re-embedding with this loop)."""
    due = now() if run_first else next_after(now())
    started = 0
    while not should_stop():
        current = now()
        if current < due:
            sleep(min(poll_seconds, (due - current).total_seconds()))
            continue
        started += 1
        try:
            run_cycle()
        except Exception as exc:
            logger.error("Scheduled %s failed\n%s", what, safe_traceback(exc))
        due = next_after(max(now(), due))
    return started
