"""The processes ``manage.py serve`` runs and stops together: the web server (uvicorn), a Celery worker and
beat.

``serve`` stays their parent. It starts the web first and the background work once the web answers, so the
worker's and beat's start-up never delays the first answer. When one of them ends, or on SIGINT or SIGTERM
(Ctrl-C), it stops the others: SIGTERM (a warm shutdown: a worker finishes its task), then, after
:data:`STOP_GRACE` seconds, SIGKILL (a late-acknowledged task goes back to the broker). On Linux each child
also gets SIGTERM if ``serve`` itself is killed (``PR_SET_PDEATHSIG``), so nothing is left behind.
"""

import ctypes
import ctypes.util
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from types import FrameType

READY_TIMEOUT = 300.0
"""Seconds the web is given to answer its /readyz before the background work starts anyway."""
STOP_GRACE = 20.0
"""Seconds the children are given to stop on SIGTERM before they are killed."""

WORKER_QUEUES = "default,vectors,dream,extraction,webhooks"


def celery_worker_argv() -> list[str]:
    """A worker of every queue (CELERY_WORKER_CONCURRENCY processes)."""
    return [sys.executable, "-m", "celery", "-A", "config", "worker", "-Q", WORKER_QUEUES, "-l", "INFO"]


def celery_beat_argv() -> list[str]:
    """beat, its schedule in the database (CELERY_BEAT_SCHEDULER)."""
    return [sys.executable, "-m", "celery", "-A", "config", "beat", "-l", "INFO"]


_LIBC = ctypes.CDLL(ctypes.util.find_library("c")) if sys.platform.startswith("linux") else None


def _die_with_parent() -> None:
    """In the child, before exec: SIGTERM when the parent dies (Linux's prctl PR_SET_PDEATHSIG). libc is
    loaded before the fork: only the call runs here."""
    if _LIBC is not None:
        _LIBC.prctl(1, signal.SIGTERM)  # 1: PR_SET_PDEATHSIG


class ProcessGroup:
    """Child processes started, awaited and stopped together."""

    def __init__(self, *, cwd: str) -> None:
        self.cwd = cwd
        self.children: dict[str, subprocess.Popen[bytes]] = {}
        self.stopping = threading.Event()
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, self._on_signal)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.stopping.set()

    def start(self, name: str, argv: Sequence[str]) -> None:
        self.children[name] = subprocess.Popen(  # noqa: S603  (our own interpreter and modules, no shell)
            list(argv), cwd=self.cwd, preexec_fn=_die_with_parent
        )

    def wait_ready(self, url: str, *, timeout: float) -> bool:
        """Wait until ``url`` answers 200 (``True``), a child ends or a stop is asked for (``False``), or
        ``timeout`` passes (``True``: start the rest anyway)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.stopping.is_set() or self._ended() is not None:
                return False
            try:
                with urllib.request.urlopen(url, timeout=2) as answer:  # noqa: S310  (our own http URL)
                    if answer.status == 200:
                        return True
            except (urllib.error.URLError, OSError):
                pass
            self.stopping.wait(0.2)
        return True

    def _ended(self) -> str | None:
        return next((name for name, child in self.children.items() if child.poll() is not None), None)

    def run(self) -> int:
        """Wait until a child ends or a stop is asked for; stop every child; return the exit code (the
        ended child's, 0 on a stop)."""
        ended = None
        while not self.stopping.is_set():
            ended = self._ended()
            if ended is not None:
                break
            self.stopping.wait(0.5)
        self.stop()
        if ended is None:
            return 0
        code = self.children[ended].returncode
        return code if code > 0 else 1

    def stop(self) -> None:
        for child in self.children.values():
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE
        for child in self.children.values():
            try:
                child.wait(max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
