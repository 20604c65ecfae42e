"""What one send of a task costs the caller when the broker is down: kombu's pooled producer (a nudge before)
against one try on a connection of its own (memoryplatform.broker.enqueue_once, a nudge now), side by side.

    .venv/bin/python -m bench.broker_down [--sends 3]

Needs the settings (a .env), this machine's Redis (database 15, emptied after) and PostgreSQL on 127.0.0.1
(a database of its own, dropped after). First what a send costs when the broker is up (the nudge of every
commit pays it), on Redis and on PostgreSQL; then the task is sent to a Redis URL on this machine where
- ``refuses``: nothing listens (the connect is refused);
- ``hangs up``: a listener takes each connection and closes it at once (counted: the connects a send made);
- ``drops``: a listener whose backlog is full, so the kernel drops each new connect's SYN (a host that drops
  packets); with the platform's Redis option ``socket_connect_timeout`` (CELERY_BROKER_CONNECTION_TIMEOUT)
  and without it (kombu's default: none, so the kernel's SYN retries bound the connect).

Prints the median seconds a send took and the connects it made.
"""

import argparse
import os
import socket
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

import django  # noqa: E402

django.setup()

from celery import Celery  # noqa: E402

from memoryplatform.broker import enqueue_once  # noqa: E402
from tests.helpers import broker_that_hangs_up  # noqa: E402


@contextmanager
def redis_up() -> Iterator[tuple[str, list[float]]]:
    import redis

    yield "redis://127.0.0.1:6379/15", []
    redis.Redis.from_url("redis://127.0.0.1:6379/15").flushdb()  # the messages sent


PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"
PG_BROKER = "sqla+postgresql+psycopg://postgres@127.0.0.1:5432/bench_broker_down"


@contextmanager
def postgresql_up() -> Iterator[tuple[str, list[float]]]:
    yield PG_BROKER, []  # one database for both rows: kombu keeps one engine per URL, its tables made once


@contextmanager
def refusing() -> Iterator[tuple[str, list[float]]]:
    with socket.socket() as probe:  # a port that was free a moment ago: nothing listens there
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    yield f"redis://127.0.0.1:{port}/0", []


@contextmanager
def dropping() -> Iterator[tuple[str, list[float]]]:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    for _ in range(4):  # fill the accept queue; never accepted
        filler = socket.socket()
        filler.setblocking(False)
        with suppress(BlockingIOError):
            filler.connect(("127.0.0.1", port))
        fillers.append(filler)
    time.sleep(0.2)
    try:
        yield f"redis://127.0.0.1:{port}/0", []
    finally:
        for filler in fillers:
            filler.close()
        listener.close()


def app_for(url: str, options: dict[str, object]) -> Celery:
    app = Celery("bench-broker-down", set_as_current=False)
    app.config_from_object("django.conf:settings", namespace="CELERY")
    app.conf.update(broker_url=url, broker_transport_options=options)
    return app


def pooled(app: Celery) -> None:
    app.tasks["vectors.drain"].apply_async(retry=False)


def once(app: Celery) -> None:
    enqueue_once(app.tasks["vectors.drain"])


def measure(
    send: Callable[[Celery], None], app: Celery, taken: list[float], sends: int
) -> tuple[float, float]:
    seconds: list[float] = []
    connects: list[int] = []
    for _ in range(sends):
        before = len(taken)
        start = time.perf_counter()
        with suppress(Exception):  # the broker is down: the failure is what is timed
            send(app)
        seconds.append(time.perf_counter() - start)
        connects.append(len(taken) - before)
    return statistics.median(seconds), statistics.median(connects)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sends", type=int, default=3, help="sends to a broker that is down, each way")
    parser.add_argument("--sends-up", type=int, default=50, help="sends to a broker that is up, each way")
    args = parser.parse_args()
    import memoryplatform.tasks  # noqa: F401 - registers vectors.drain on every app

    timeout: dict[str, object] = {"socket_connect_timeout": 4.0}
    none: dict[str, object] = {}
    pre_ping: dict[str, object] = {
        "pool_pre_ping": True
    }  # as the settings: each row has a database of its own
    rows: list[tuple[str, Callable[[], Any], str, Callable[[Celery], None], dict[str, object]]] = [
        ("Redis, up", redis_up, "pooled producer", pooled, timeout),
        ("Redis, up", redis_up, "one try", once, timeout),
        ("PostgreSQL, up", postgresql_up, "pooled producer", pooled, pre_ping),
        ("PostgreSQL, up", postgresql_up, "one try", once, pre_ping),
        ("refuses", refusing, "pooled producer", pooled, none),
        ("refuses", refusing, "one try", once, none),
        ("hangs up", broker_that_hangs_up, "pooled producer", pooled, none),
        ("hangs up", broker_that_hangs_up, "one try", once, none),
        ("drops", dropping, "pooled producer, socket_connect_timeout 4", pooled, timeout),
        ("drops", dropping, "one try, socket_connect_timeout 4", once, timeout),
        ("drops", dropping, "one try, no socket_connect_timeout", once, none),
    ]
    import psycopg

    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute("DROP DATABASE IF EXISTS bench_broker_down")
        conn.execute("CREATE DATABASE bench_broker_down")
    print("| broker | send | ms a send (median) | connects a send |")
    print("|---|---|---|---|")
    for broker, make, way, send, options in rows:
        with make() as (url, taken):
            app = app_for(url, options)
            up = broker.endswith(", up")
            sends = args.sends_up if up else args.sends
            if broker == "drops" and not options:
                sends = 1  # over two minutes a send
            if up:
                send(app)  # the first connect, and the transport's engine and tables, before the timing
            seconds, connects = measure(send, app, taken, sends)
            app.close()
        shown = f"{connects:g}" if broker == "hangs up" else "-"
        print(f"| {broker} | {way} | {seconds * 1000:.1f} | {shown} |", flush=True)
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute("DROP DATABASE bench_broker_down WITH (FORCE)")


if __name__ == "__main__":
    main()
