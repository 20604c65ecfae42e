"""A commit's nudge to a background task, at most once per window per process: the vector queue's drain
(memoryplatform/embeddings/nudge.py) and the webhook deliveries' sweep (events/nudge.py) are sent so.

One message per commit would flood the broker under a burst of writes, while one run of such a task takes
everything written before it reads. So a process sends at most one nudge per ``window`` seconds: a nudge
asked for within the window after another is sent once, at the window's end (a trailing timer), and so
still after the commit that asked for it.
"""

import threading
import time
from collections.abc import Callable

WINDOW = 0.25
"""Seconds between two nudges from one process."""


class Nudger:
    """Call ``send`` at most once per ``window`` seconds, the last request always followed by a send."""

    def __init__(self, send: Callable[[], None], *, window: float = WINDOW) -> None:
        self.send = send
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
        self.send()

    def _send_due(self) -> None:
        with self._lock:
            self._timer = None
            self._last = time.monotonic()
        self.send()
