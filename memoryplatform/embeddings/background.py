"""One daemon thread per process that runs embedding jobs off the request path, for deployments without a
Celery broker (REDIS_URL empty) and an embedder that is not in process.

Chosen over the embedded scheduler because a write's vector should follow within moments, not at the next
tick, and over a thread per write because one thread bounds the load (the jobs run one after another) and
keeps one database connection. A job lost when the process stops (or when the queue is full) is not lost
work: its entries stay "missing", and ``manage.py embed --missing`` fills them.
"""

import logging
import queue
import threading
from collections.abc import Callable

from django.db import close_old_connections, connection

logger = logging.getLogger(__name__)

MAX_QUEUED = 10_000
_jobs: "queue.Queue[Callable[[], None]]" = queue.Queue(maxsize=MAX_QUEUED)
_started = threading.Lock()
_thread: threading.Thread | None = None


def _run() -> None:
    while True:
        job = _jobs.get()
        try:
            close_old_connections()  # a connection past CONN_MAX_AGE or broken is replaced
            job()
        except Exception:
            logger.exception("A background embedding job failed.")
        finally:
            _jobs.task_done()
            if _jobs.empty():
                connection.close()  # no idle connection held between bursts


def submit(job: Callable[[], None]) -> bool:
    """Queue a job for the background thread (started on first use). False when the queue is full."""
    global _thread
    with _started:
        if _thread is None or not _thread.is_alive():
            _thread = threading.Thread(target=_run, name="embeddings", daemon=True)
            _thread.start()
    try:
        _jobs.put_nowait(job)
    except queue.Full:
        logger.warning(
            "The embedding queue is full (%d jobs); `manage.py embed --missing` will fill the rest.",
            MAX_QUEUED,
        )
        return False
    return True


def drain() -> None:
    """Wait until every queued job has run (tests, and a clean shutdown)."""
    _jobs.join()
