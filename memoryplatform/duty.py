"""Background work's duty cycle: while the node is busy with work not its own, background work runs only
``BACKGROUND_DUTY`` of the time and sleeps the rest (issue 34).

Priority alone did not keep background work from slowing requests on a 2-core node (bench/RESULTS.md, session
13: a nice 10 or ``SCHED_IDLE`` consumer still cost the heaviest user's hybrid search 1.2-1.7x): what a read
loses while the local model runs is what the cores share (memory bandwidth, caches), which no scheduler
divides. So the work itself steps aside. After each unit of background work (a consumer's batch, a batch of
Dream's key vectors or of its writes, a re-embedding batch), :meth:`DutyCycle.rest` looks at how busy the
node was meanwhile with others' work, and if that reached ``BACKGROUND_BUSY_CORES`` (CPU seconds a second,
from Linux's ``/proc/stat``, less this process's own), it sleeps ``worked x (1 - duty) / duty`` seconds (at
most ``MAX_REST_SECONDS``). An idle node is never made to wait: the backlog then drains at full speed. Where
the node's CPU cannot be read (not Linux), the node counts as busy.

Only background processes pace: :func:`memoryplatform.embeddings.consumer.yield_to_requests` turns it on
(:func:`enable`), with the priority. A management command run by hand (``embed --missing``, ``dream``) or a
test in process runs at full speed unless it made itself background.

The measure counts the database's work for this process's own batch as others' (it runs in a PostgreSQL
backend): a batch's writes are milliseconds against its seconds of embedding, far below the default
threshold.
"""

import logging
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from prometheus_client import Counter

logger = logging.getLogger(__name__)
MAX_REST_SECONDS = 60.0  # one rest at most, whatever the unit of work took
PROC_STAT = Path("/proc/stat")

rested_seconds = Counter(
    "background_rested_seconds",
    "Seconds background work (the vector consumer, Dream, re-embedding) slept to leave a busy node to "
    "others' work (memoryplatform/duty.py).",
)


def node_busy_seconds() -> float | None:
    """CPU seconds all of the node's cores have been busy since boot (``/proc/stat``: every state but idle
    and iowait), or None where that cannot be read."""
    try:
        line = PROC_STAT.read_text(encoding="ascii").split("\n", 1)[0].split()
        ticks = [int(value) for value in line[1:9]]  # user nice system idle iowait irq softirq steal
    except (OSError, ValueError):
        return None
    if len(line) < 9 or line[0] != "cpu":
        return None
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


def own_seconds() -> float:
    """CPU seconds this process (all its threads) has used."""
    times = os.times()
    return times.user + times.system


def validate(*, duty: float, busy_cores: float) -> None:
    """ValueError unless ``duty`` is in (0, 1] and ``busy_cores`` is not negative (system check E014)."""
    if not 0 < duty <= 1:
        raise ValueError(f"BACKGROUND_DUTY must be more than 0 and at most 1, got {duty}")
    if busy_cores < 0:
        raise ValueError(f"BACKGROUND_BUSY_CORES must be 0 or more, got {busy_cores}")


@dataclass(frozen=True)
class Sample:
    at: float
    node: float | None
    own: float


@dataclass
class DutyCycle:
    """Rests after background work so that it takes at most ``duty`` of the time while others keep at least
    ``busy_cores`` of the node's CPU busy. ``duty`` 1 never rests. The clock, the sleep and the CPU readings
    are parameters so that the rule is testable without a busy node."""

    duty: float
    busy_cores: float
    node: Callable[[], float | None] = node_busy_seconds
    own: Callable[[], float] = own_seconds
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    rested: float = 0.0  # seconds slept in all
    _mark: Sample = field(init=False, repr=False)

    def __post_init__(self) -> None:
        validate(duty=self.duty, busy_cores=self.busy_cores)
        self._mark = self._sample()

    def _sample(self) -> Sample:
        return Sample(self.clock(), self.node(), self.own())

    def others_busy(self, since: Sample | None = None) -> float | None:
        """Cores' worth of CPU the node spent on others' work since ``since`` (by default the last rest, or
        the start), or None where the node's CPU cannot be read."""
        now, mark = self._sample(), since or self._mark
        elapsed = now.at - mark.at
        if now.node is None or mark.node is None or elapsed <= 0:
            return None
        return max(0.0, (now.node - mark.node) - (now.own - mark.own)) / elapsed

    def rest(self, worked: float, since: Sample | None = None) -> float:
        """After ``worked`` seconds of background work: sleep, if the node was busy meanwhile (from ``since``,
        by default the last rest), long enough that the work took ``duty`` of the time; returns the seconds
        slept."""
        pause = 0.0
        if self.duty < 1 and worked > 0:
            busy = self.others_busy(since)
            if busy is None or busy >= self.busy_cores:
                pause = min(worked * (1 - self.duty) / self.duty, MAX_REST_SECONDS)
                logger.debug("Worked %.2f s beside %s busy cores: rest %.2f s.", worked, busy, pause)
                self.sleep(pause)
                self.rested += pause
                rested_seconds.inc(pause)
        self._mark = self._sample()
        return pause

    @contextmanager
    def work(self) -> Iterator[None]:
        """Time the block as background work, and :meth:`rest` after it (not after an exception), judging the
        node by the block's own window: threads of one process (the background process's consumer and Dream)
        share the cycle without cutting each other's windows."""
        started = self._sample()
        yield
        self.rest(self.clock() - started.at, since=started)


_process: DutyCycle | None = None


def enable() -> DutyCycle:
    """Make this process's background work keep the duty cycle of the settings (idempotent)."""
    global _process
    if _process is None:
        _process = DutyCycle(duty=settings.BACKGROUND_DUTY, busy_cores=settings.BACKGROUND_BUSY_CORES)
    return _process


@contextmanager
def paced() -> Iterator[None]:
    """A unit of background work: in a background process (:func:`enable`), rest after it as the duty cycle
    of the current settings says; elsewhere, nothing."""
    if _process is None:
        yield
        return
    _process.duty, _process.busy_cores = settings.BACKGROUND_DUTY, settings.BACKGROUND_BUSY_CORES
    with _process.work():
        yield
