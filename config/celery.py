"""The one Celery app: every background job of the platform runs on it (docs/background.md).

- Configured from the settings' ``CELERY_*`` names (config/settings.py): the broker is Redis where
  ``REDIS_URL`` names one, else the platform's own PostgreSQL (memoryplatform/broker.py); JSON only; late
  acks, a task whose worker process dies is given back to the broker; time limits on every task.
- Each app's jobs are ``@shared_task``s in that app's ``tasks.py`` (found by ``autodiscover_tasks``), routed
  to a queue per kind of job (``CELERY_TASK_ROUTES``).
- beat's schedule is in the database (django-celery-beat's DatabaseScheduler), seeded on migrate from the
  settings (each app registers its own in its AppConfig.ready: memoryplatform/schedules.py).
- A worker is background work: it lowers its priority before it starts its pool (BACKGROUND_NICE,
  BACKGROUND_EMBEDDINGS_THREADS), counts its tasks into Prometheus (memoryplatform/taskmetrics.py), and,
  started with ``WORKER_METRICS_PORT``, serves every pool process's metrics on that port
  (PROMETHEUS_MULTIPROC_DIR).
"""

import os
from typing import Any

from celery import Celery
from celery.signals import (
    beat_init,
    before_task_publish,
    task_failure,
    task_postrun,
    task_prerun,
    worker_init,
    worker_process_shutdown,
)

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("memoryplatform")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@before_task_publish.connect
def _before_publish(**kwargs: Any) -> None:
    from memoryplatform.broker import embedded_broker_up

    embedded_broker_up()


@worker_init.connect
def _worker_starts(sender: Any = None, **kwargs: Any) -> None:
    from memoryplatform.broker import embedded_broker_up
    from memoryplatform.embeddings.consumer import yield_to_requests
    from memoryplatform.metricsdir import serve_metrics_port

    embedded_broker_up()
    yield_to_requests()  # before the pool forks: its processes inherit the priority
    port = os.environ.get("WORKER_METRICS_PORT", "").strip()
    if port:
        serve_metrics_port(int(port))


@beat_init.connect
def _beat_starts(sender: Any = None, **kwargs: Any) -> None:
    from memoryplatform.broker import embedded_broker_up
    from memoryplatform.metricsdir import serve_metrics_port

    embedded_broker_up()
    port = os.environ.get("BEAT_METRICS_PORT", "").strip()
    if port:
        serve_metrics_port(int(port))


@task_prerun.connect
def _task_starts(task_id: str = "", task: Any = None, **kwargs: Any) -> None:
    from memoryplatform import taskmetrics

    taskmetrics.task_started(task_id=task_id, name=getattr(task, "name", "unknown"))


@task_postrun.connect
def _task_ends(task_id: str = "", task: Any = None, state: str | None = None, **kwargs: Any) -> None:
    from memoryplatform import taskmetrics

    taskmetrics.task_ended(task_id=task_id, name=getattr(task, "name", "unknown"), state=state or "")


@task_failure.connect
def _task_fails(task_id: str = "", sender: Any = None, **kwargs: Any) -> None:
    from memoryplatform import taskmetrics

    taskmetrics.task_failed(name=getattr(sender, "name", "unknown"))


@worker_process_shutdown.connect
def _worker_process_ends(pid: int | None = None, **kwargs: Any) -> None:
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(pid or os.getpid())
