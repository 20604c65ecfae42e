"""A commit's nudge to a background task, at most once per window per process: the vector queue's drain
(memoryplatform/embeddings/nudge.py) and the webhook deliveries' sweep (events/nudge.py) are sent so.

One message per commit would flood the broker under a burst of writes, while one run of such a task takes
everything written before it reads. So a process sends at most one nudge per ``window`` seconds: a nudge
asked for within the window after another is sent once, at the window's end (a trailing timer), and so
still after the commit that asked for it. A broker that does not answer is logged, never raised: a write is
never failed by its nudge, and beat's sweep of the same task catches what a nudge missed.

A nudge is sent on the committing thread, with one try at the broker
(:func:`memoryplatform.broker.enqueue_once`). After a try the broker did not take, the process sends that
broker no nudge for ``cooldown`` seconds: a broker that is down, or slow to refuse a connection, costs one
write in that time its wait, not every write.
"""

import logging
import threading
import time
from collections.abc import Callable

from django.db import transaction

logger = logging.getLogger(__name__)

WINDOW = 0.25
"""Seconds between two nudges from one process."""

COOLDOWN = 10.0
"""Seconds a process sends no nudge to a broker that did not take its last one (beat's sweeps, every minute by
default, send the same tasks)."""


def _broker() -> str:
    """The broker this process sends to now (the URL is never logged: it may hold a password)."""
    from celery import current_app

    return str(current_app.conf.broker_write_url or current_app.conf.broker_url)


class Nudger:
    """Call ``enqueue`` at most once per ``window`` seconds, the last request always followed by a call.

    ``what`` names the task in the log line when the broker does not answer."""

    def __init__(
        self,
        enqueue: Callable[[], object],
        *,
        what: str,
        window: float = WINDOW,
        cooldown: float = COOLDOWN,
    ) -> None:
        self.enqueue = enqueue
        self.what = what
        self.window = window
        self.cooldown = cooldown
        self._lock = threading.Lock()
        self._last = -float("inf")
        self._timer: threading.Timer | None = None
        self._down: tuple[str, float] | None = None  # the broker that did not answer, and until when

    def on_commit(self) -> None:
        """Request a nudge once the current transaction commits (at once outside one)."""
        transaction.on_commit(self.request, robust=True)

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
        self.send()

    def send(self) -> None:
        broker = _broker()
        with self._lock:
            down = self._down
        if down is not None and down[0] == broker and time.monotonic() < down[1]:
            return  # it did not answer a moment ago: beat's sweep sends the task meanwhile
        try:
            self.enqueue()
        except Exception as exc:  # the broker: a write is never failed by its nudge
            with self._lock:
                self._down = (broker, time.monotonic() + self.cooldown)
            logger.warning(
                "Could not enqueue %s (%s); beat's sweep will, and no nudge is sent for %g s",
                self.what,
                type(exc).__name__,
                self.cooldown,
            )

    def _send_due(self) -> None:
        with self._lock:
            self._timer = None
            self._last = time.monotonic()
        self.send()
