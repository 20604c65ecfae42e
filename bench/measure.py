"""Measuring: one door's calls from N client threads, their latencies and errors (a ``Phase``)."""

import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

SEQ = itertools.count(1)  # unique suffixes for new keys and turn ids, across phases and doors
RUN_TAG = format(int(time.time()) % 10**6, "06d")


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", flush=True)


def percentile(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, int(round(p / 100 * len(ordered) + 0.5)) - 1))
    return ordered[rank]


@dataclass
class Phase:
    latencies: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    wall: float = 0.0
    concurrency: int = 1

    def summary(self) -> dict[str, Any]:
        n = len(self.latencies)
        return {
            "n": n,
            "concurrency": self.concurrency,
            "p50_ms": percentile(self.latencies, 50) * 1000,
            "p95_ms": percentile(self.latencies, 95) * 1000,
            "p99_ms": percentile(self.latencies, 99) * 1000,
            "p999_ms": percentile(self.latencies, 99.9) * 1000,
            "max_ms": max(self.latencies, default=float("nan")) * 1000,
            "rps": n / self.wall if self.wall else float("nan"),
            "errors": len(self.errors),
            "first_error": self.errors[0] if self.errors else None,
        }


@dataclass
class Door:
    """How one door calls an operation: per-thread setup (a connection), the call, and teardown."""

    call: Callable[[Any], object]
    setup: Callable[[], Any] = lambda: None
    teardown: Callable[[Any], None] = lambda ctx: None


def drive(door: Door, *, n: int, concurrency: int, seconds: float) -> Phase:
    """``n`` calls (or ``seconds``, whichever ends first) from ``concurrency`` threads."""
    phase = Phase(concurrency=concurrency)
    counter = itertools.count()
    lock = threading.Lock()
    ready = threading.Barrier(concurrency + 1)
    deadline = [0.0]

    def worker() -> None:
        ctx = door.setup()
        mine: list[float] = []
        try:
            ready.wait()
            while next(counter) < n and time.perf_counter() < deadline[0]:
                started = time.perf_counter()
                try:
                    door.call(ctx)
                except Exception as exc:  # noqa: BLE001 (counted and reported)
                    with lock:
                        phase.errors.append(f"{type(exc).__name__}: {exc}"[:300])
                else:
                    mine.append(time.perf_counter() - started)
        finally:
            with lock:
                phase.latencies.extend(mine)
            door.teardown(ctx)

    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for thread in threads:
        thread.start()
    deadline[0] = time.perf_counter() + seconds
    started = time.perf_counter()
    ready.wait()
    for thread in threads:
        thread.join()
    phase.wall = time.perf_counter() - started
    return phase
