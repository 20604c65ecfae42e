"""A write's nudge to the vector queue's task: as the write commits, ``vectors.drain`` is enqueued
(memoryplatform/tasks.py), so its texts get their vectors within moments; beat's sweep (the same task every
EMBEDDINGS_SWEEP_INTERVAL seconds) catches whatever a nudge missed (a broker that was down, a lost message).

One message per commit would flood the broker under a burst of writes, while one running drain takes every
text queued before it reads the queue. So a process sends at most one nudge per :data:`WINDOW` seconds: a
nudge asked for within the window after another is sent once, at the window's end (a trailing timer), and so
still after the commit that asked for it.
"""

import logging
import threading
import time

from django.db import transaction

logger = logging.getLogger(__name__)

WINDOW = 0.25
"""Seconds between two nudges from one process."""


class Nudger:
    """Send ``vectors.drain`` at most once per ``window`` seconds, the last request always followed by a
    send."""

    def __init__(self, *, window: float = WINDOW) -> None:
        self.window = window
        self._lock = threading.Lock()
        self._last = -float("inf")
        self._timer: threading.Timer | None = None

    def request(self) -> None:
        with self._lock:
            if self._timer is not None:  # a send is due at the window's end: it covers this request
                return
            wait = self._last + self.window - time.monotonic()
            if wait > 0:
                self._timer = threading.Timer(wait, self._send_due)
                self._timer.daemon = True
                self._timer.start()
                return
            self._last = time.monotonic()
        send()

    def _send_due(self) -> None:
        with self._lock:
            self._timer = None
            self._last = time.monotonic()
        send()


def send() -> None:
    """Enqueue one ``vectors.drain``; a broker that does not answer is logged (the sweep drains later)."""
    from memoryplatform.tasks import vectors_drain

    try:
        vectors_drain.apply_async(retry=False)
    except Exception as exc:  # the broker: a write is never failed by its nudge
        logger.warning("Could not enqueue the vector queue's drain (%s); the sweep will", type(exc).__name__)


_nudger = Nudger()


def nudge_on_commit() -> None:
    """Nudge the vector queue's task once the current transaction commits (at once outside one)."""
    transaction.on_commit(_nudger.request, robust=True)
