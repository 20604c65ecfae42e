"""The Celery app. Broker and schedule come from settings (REDIS_URL, DREAM_SCHEDULE,
EMBEDDINGS_REEMBED_INTERVAL).

- Beat sends ``dream.run_cycle`` (named, not imported: memoryplatform does not import dream) on
  ``settings.DREAM_CRONTAB``, with ``expires`` just under the schedule's shortest gap, so a backlog never
  stacks up cycles.
- Beat sends ``usermemory.reembed`` (vectors missing, stale or of another model) every
  ``settings.EMBEDDINGS_REEMBED_INTERVAL`` seconds (0, or provider ``none``: never), expiring likewise.
- A worker yields the cores to the requests of a web server on the same node: BACKGROUND_NICE and
  BACKGROUND_EMBEDDINGS_THREADS (``memoryplatform.embeddings.consumer.yield_to_requests``).
- A worker started with ``WORKER_METRICS_PORT`` serves Prometheus metrics on that port from its main
  process. With the default prefork pool, tasks run in child processes, so set ``PROMETHEUS_MULTIPROC_DIR``
  (an empty, writable directory; docker-compose.yml does) and the port serves every child's counters
  through prometheus_client's multiprocess collector. With ``--pool=solo`` or ``--pool=threads`` the tasks
  run in the main process and the default registry is served as is.
"""

import logging
import os
from typing import Any

import environ
from celery import Celery
from celery.schedules import crontab
from celery.signals import worker_init, worker_process_shutdown

from memoryplatform.crontabs import crontab_min_period

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

logger = logging.getLogger(__name__)
env = environ.Env()

app = Celery("memoryplatform")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

DREAM_TASK = "dream.run_cycle"
REEMBED_TASK = "usermemory.reembed"
EXTRACTION_TASK = "extraction.run_background"


def dream_expires_seconds(schedule: crontab) -> int:
    """How long a scheduled cycle may wait in the queue: 90 % of the schedule's shortest gap."""
    return max(1, int(crontab_min_period(schedule) * 0.9))


@app.on_after_configure.connect
def _schedule_dream(sender: Celery, **kwargs: Any) -> None:
    from django.conf import settings

    sender.add_periodic_task(
        settings.DREAM_CRONTAB,
        sender.signature(DREAM_TASK, kwargs={"trigger": "schedule"}),
        name="dream-cycle",
        expires=dream_expires_seconds(settings.DREAM_CRONTAB),
    )


@app.on_after_configure.connect
def _schedule_reembed(sender: Celery, **kwargs: Any) -> None:
    from django.conf import settings

    interval = settings.EMBEDDINGS_REEMBED_INTERVAL
    if interval <= 0 or settings.EMBEDDINGS_PROVIDER == "none":
        return
    sender.add_periodic_task(
        float(interval),
        sender.signature(REEMBED_TASK),
        name="reembed",
        expires=max(1, int(interval * 0.9)),
    )


@app.on_after_configure.connect
def _schedule_extraction(sender: Celery, **kwargs: Any) -> None:
    from django.conf import settings

    interval = settings.EXTRACTION_INTERVAL
    if interval <= 0 or not settings.LLM_PROVIDER:
        return
    sender.add_periodic_task(
        float(interval),
        sender.signature(EXTRACTION_TASK),
        name="extraction",
        expires=max(1, int(interval * 0.9)),
    )


def _multiprocess_dir() -> str:
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR", "")


@worker_init.connect
def _serve_worker_metrics(sender: Any = None, **kwargs: Any) -> None:
    """Serve Prometheus metrics on WORKER_METRICS_PORT from the worker's main process."""
    raw_port = env.str("WORKER_METRICS_PORT", default="").strip()  # empty (as in .env.example): off
    if not raw_port:
        return
    port = int(raw_port)
    from memoryplatform.metricsdir import serve_metrics_port

    if not _multiprocess_dir() and "prefork" in str(getattr(sender, "pool_cls", "")):
        logger.warning(
            "WORKER_METRICS_PORT with the prefork pool but no PROMETHEUS_MULTIPROC_DIR: counters of tasks "
            "run in pool processes will not show. Set PROMETHEUS_MULTIPROC_DIR or use --pool=solo/threads."
        )
    serve_metrics_port(port)
    logger.info("Serving worker metrics on port %s", port)


@worker_init.connect
def _yield_to_requests(sender: Any = None, **kwargs: Any) -> None:
    """A worker is background work: its main process (and so every pool process it starts) runs at a lower
    priority, with few threads for the local model (BACKGROUND_NICE, BACKGROUND_EMBEDDINGS_THREADS)."""
    from memoryplatform.embeddings.consumer import yield_to_requests

    yield_to_requests()


@worker_process_shutdown.connect
def _forget_worker_process(pid: int | None = None, **kwargs: Any) -> None:
    if _multiprocess_dir():
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(pid or os.getpid())
