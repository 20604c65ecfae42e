"""Prometheus metrics of the background work, on the web's /metrics beside Dream's own.

- Counted in the worker's processes (config/celery.py connects Celery's task_prerun, task_postrun and
  task_failure signals here), into the multiprocess directory the web reads (memoryplatform/metricsdir.py):
  ``celery_task_runs_total{task,state}``, ``celery_task_failures_total{task}``,
  ``celery_task_duration_seconds``.
- Read at each scrape of /metrics (:func:`report_background`): each queue's depth from the broker, and each of
  beat's schedules' last run from its table.
"""

import logging
import threading
import time

from django.db import DatabaseError
from django_celery_beat.models import PeriodicTask
from kombu.exceptions import KombuError
from prometheus_client import Counter, Gauge, Histogram

from memoryplatform.broker import broker_queue_depths

logger = logging.getLogger(__name__)

QUEUES = ("default", "vectors", "dream", "extraction", "webhooks")
"""Every queue a task is routed to (CELERY_TASK_ROUTES); a worker started by ``serve`` consumes them all."""

task_runs = Counter(
    "celery_task_runs", "Background tasks run by a worker, by task and final state.", ["task", "state"]
)
task_failures = Counter("celery_task_failures", "Background tasks that raised, by task.", ["task"])
task_duration = Histogram(
    "celery_task_duration_seconds",
    "Wall time of background tasks, by task.",
    ["task"],
    buckets=(0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600, float("inf")),
)
queue_depth = Gauge(
    "celery_queue_depth",
    "Messages waiting in the broker, by queue (read at each scrape of /metrics).",
    ["queue"],
    multiprocess_mode="mostrecent",
)
beat_last_run = Gauge(
    "celery_beat_last_run_timestamp_seconds",
    "When beat last sent each schedule's task (Unix time; read from its table at each scrape of /metrics).",
    ["schedule"],
    multiprocess_mode="mostrecent",
)

_started: dict[str, float] = {}
_lock = threading.Lock()


def task_started(*, task_id: str, name: str) -> None:
    with _lock:
        _started[task_id] = time.monotonic()


def task_ended(*, task_id: str, name: str, state: str) -> None:
    with _lock:
        started = _started.pop(task_id, None)
    task_runs.labels(task=name, state=state or "UNKNOWN").inc()
    if started is not None:
        task_duration.labels(task=name).observe(time.monotonic() - started)


def task_failed(*, name: str) -> None:
    task_failures.labels(task=name).inc()


def report_background() -> None:
    """Set the queue depth and beat's last runs as of now; a broker that does not answer leaves the depth as
    it was (logged), the rest of /metrics still answers."""
    try:
        for queue, depth in broker_queue_depths(QUEUES).items():
            queue_depth.labels(queue=queue).set(depth)
    except (KombuError, OSError, DatabaseError) as exc:
        logger.warning("Reading the queues' depth for /metrics failed: %s", type(exc).__name__)
    try:
        for name, last in PeriodicTask.objects.filter(last_run_at__isnull=False).values_list(
            "name", "last_run_at"
        ):
            beat_last_run.labels(schedule=name).set(last.timestamp())
    except DatabaseError as exc:
        logger.warning("Reading beat's last runs for /metrics failed: %s", type(exc).__name__)
