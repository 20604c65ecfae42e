"""What the events outbox costs an upsert, and how many webhook deliveries a second one deliverer makes.

    env -u DATABASE_URL .venv/bin/python -m bench.outbox [--rounds 5] [--writes 300] [--deliveries 2000]

On a fresh database (``bench_outbox``; ``bench/target.py``), one agent upserts through the service
(``memory_upsert``: a new key, then a new value of it, alternately, over 50 users) under three conditions,
interleaved round by round so the machine's noise falls on all of them alike:

- ``no outbox``: the outbox trigger disabled (what a write cost before events);
- ``outbox``: the trigger on, no subscription;
- ``outbox + delivering``: the trigger on, and a subscription whose deliverer (a thread of this process, its
  own connection) posts every event to a receiver on loopback while the writes run.

Then the deliveries: ``--deliveries`` events are written, and one deliverer (``webhook_deliver``, as the
Celery task and ``manage.py deliver_webhooks`` run it) posts them all to the loopback receiver, which answers
204 at once; reported: events a second, from the first POST to the last commit of the subscription's position.
"""

import argparse
import http.server
import os
import statistics
import threading
import time
from typing import Any

from bench import target

AGENT = "outbox-bench"
USERS = 50


class _Quiet(http.server.BaseHTTPRequestHandler):
    received = 0

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        self.rfile.read(int(self.headers["Content-Length"]))
        type(self).received += 1
        self.send_response(204)
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


def _receiver() -> tuple[http.server.ThreadingHTTPServer, str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/hook"


def _setup(db_url: str) -> Any:
    bench_target = target.resolve(db_url, name="bench_outbox")
    target.create(bench_target, reset=True)
    target.django_setup(bench_target)
    from django.conf import settings
    from django.core.management import call_command

    from apikeys.caller import Caller
    from apikeys.services import agent_create
    from usermemory import services

    settings.WEBHOOK_ALLOW_PRIVATE = True  # the receiver is on loopback
    call_command("migrate", verbosity=0, interactive=False)
    agent = agent_create(agent_id=AGENT, display_name="outbox bench")
    services.policy_update(agent_id=AGENT, max_entries_per_user=100_000, max_writes_per_turn=1_000_000)
    return Caller(role="agent", agent=agent)


def _trigger(*, enabled: bool) -> None:
    from django.db import connection

    verb = "ENABLE" if enabled else "DISABLE"
    with connection.cursor() as cursor:
        cursor.execute(f"ALTER TABLE usermemory_memoryevent {verb} TRIGGER events_outbox")


def _writes(caller: Any, *, count: int, stem: str) -> list[float]:
    """``count`` upserts, each timed: a new key, then a new value of it."""
    from usermemory.services import MemoryWrite, memory_upsert

    times = []
    for n in range(count):
        write = MemoryWrite(user_id=f"u{n % USERS}", key=f"{stem}-{n // 2}", value=f"value {n} of {stem}")
        started = time.perf_counter()
        memory_upsert(caller=caller, write=write)
        times.append(time.perf_counter() - started)
    return times


class _Deliverer(threading.Thread):
    """Delivers a subscription's events until stopped (its own database connection)."""

    def __init__(self, subscription_id: str) -> None:
        super().__init__(daemon=True)
        self.subscription_id = subscription_id
        self.stop = threading.Event()
        self.delivered = 0

    def run(self) -> None:
        from django.db import connection

        from events.services import webhook_deliver

        try:
            while not self.stop.is_set():
                report = webhook_deliver(subscription_id=self.subscription_id)
                self.delivered += report.delivered
                if not report.delivered:
                    self.stop.wait(0.05)
        finally:
            connection.close()


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))] * 1000


def _upsert_costs(caller: Any, url: str, *, rounds: int, writes: int) -> dict[str, list[float]]:
    from events.services import webhook_create, webhook_update

    admin = type(caller)(role="admin")
    created = webhook_create(caller=admin, url=url, agent_id=AGENT, event_types=[])
    webhook_update(caller=admin, subscription_id=created.subscription.pk, enabled=False)
    times: dict[str, list[float]] = {"no outbox": [], "outbox": [], "outbox + delivering": []}
    _writes(caller, count=50, stem="warm")
    for round_ in range(rounds):
        for condition in times:
            _trigger(enabled=condition != "no outbox")
            deliverer = None
            if condition == "outbox + delivering":
                webhook_update(caller=admin, subscription_id=created.subscription.pk, enabled=True)
                deliverer = _Deliverer(str(created.subscription.pk))
                deliverer.start()
            times[condition] += _writes(caller, count=writes, stem=f"r{round_}-{condition}")
            if deliverer is not None:
                deliverer.stop.set()
                deliverer.join()
                webhook_update(caller=admin, subscription_id=created.subscription.pk, enabled=False)
        print(f"round {round_ + 1}/{rounds} done", flush=True)
    _trigger(enabled=True)
    return times


def _delivery_rate(caller: Any, url: str, *, count: int) -> tuple[int, float]:
    from events.services import webhook_create, webhook_deliver

    created = webhook_create(caller=type(caller)(role="admin"), url=url, agent_id=AGENT, event_types=[])
    _writes(caller, count=count, stem="deliveries")
    before = _Quiet.received
    delivered, started = 0, time.perf_counter()
    while delivered < count:
        report = webhook_deliver(subscription_id=created.subscription.pk, max_events=500)
        assert report.delivered or report.more, report  # noqa: S101 (a bench's sanity check)
        delivered += report.delivered
    seconds = time.perf_counter() - started
    assert _Quiet.received - before == delivered  # noqa: S101
    return delivered, seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--writes", type=int, default=300, help="upserts per condition per round")
    parser.add_argument("--deliveries", type=int, default=2000)
    parser.add_argument("--db-url", default=os.environ.get("DATABASE_URL", ""))
    args = parser.parse_args(argv)
    caller = _setup(args.db_url)
    server, url = _receiver()
    try:
        times = _upsert_costs(caller, url, rounds=args.rounds, writes=args.writes)
        delivered, seconds = _delivery_rate(caller, url, count=args.deliveries)
    finally:
        server.shutdown()
    print("\n| condition | upserts | p50 ms | p99 ms | mean ms |\n|---|---|---|---|---|")
    for condition, values in times.items():
        mean = statistics.fmean(values) * 1000
        print(
            f"| {condition} | {len(values)} | {_p(values, 0.5):.2f} | {_p(values, 0.99):.2f} | {mean:.2f} |"
        )
    print(
        f"\ndeliveries: {delivered} events in {seconds:.1f} s, "
        f"{delivered / seconds:.0f} a second (one deliverer)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
