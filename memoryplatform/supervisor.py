"""Keep one child process running: the background process beside ``manage.py serve`` (``dream_scheduler``:
the vector consumer, Dream's schedule, the re-embedding and the extraction).

That process runs native code (the local model) and hours of work; if it dies (a signal, an abort in native
code, the kernel's OOM killer), nothing else would start it again and every later write would wait for its
vector for good. The supervisor is a small process of its own that holds no model, no thread and no
connection: it starts the child, waits for it, and starts it again when it exits while the server still
runs, after a pause that doubles from :data:`FIRST_PAUSE` to :data:`LONGEST_PAUSE` while the child keeps
dying young (it is reset once a child has run :data:`HEALTHY_AFTER` seconds). It stops, and stops its child,
when its own parent (the server) is gone or on SIGTERM or SIGINT. Run as a service of its own, the
deployment restarts it (``restart: unless-stopped``), and ``embed --follow`` likewise.
"""

import logging
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from types import FrameType

logger = logging.getLogger(__name__)

FIRST_PAUSE = 1.0
LONGEST_PAUSE = 60.0
HEALTHY_AFTER = 60.0
STOP_GRACE = 10.0
"""Seconds a child is given to stop on SIGTERM before it is killed."""


def describe_exit(code: int) -> str:
    """``exit status 1`` or ``signal SIGKILL``, from a ``Popen.returncode``."""
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit status {code}"


def supervise(
    argv: Sequence[str],
    *,
    parent_gone: Callable[[], bool],
    poll_seconds: float = 1.0,
    cwd: str | None = None,
) -> int:
    """Run ``argv`` until ``parent_gone()`` or SIGTERM/SIGINT, starting it again each time it exits; returns
    how many times it was started again."""
    stopping = threading.Event()

    def stop(signum: int, frame: FrameType | None) -> None:
        stopping.set()

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, stop)
    restarts = 0
    pause = FIRST_PAUSE
    while not stopping.is_set() and not parent_gone():
        started = time.monotonic()
        child = subprocess.Popen(list(argv), cwd=cwd)  # noqa: S603 (our own manage.py, no shell)
        while child.poll() is None:
            if stopping.is_set() or parent_gone():
                _stop(child)
                return restarts
            stopping.wait(poll_seconds)
        if stopping.is_set() or parent_gone():
            break
        ran = time.monotonic() - started
        if ran >= HEALTHY_AFTER:
            pause = FIRST_PAUSE
        logger.error(
            "The background process (pid %d) ended with %s after %.0f s; starting it again in %.0f s.",
            child.pid,
            describe_exit(child.returncode),
            ran,
            pause,
        )
        restarts += 1
        stopping.wait(pause)
        pause = min(pause * 2, LONGEST_PAUSE)
    return restarts


def _stop(child: subprocess.Popen[bytes]) -> None:
    child.terminate()
    try:
        child.wait(STOP_GRACE)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()
