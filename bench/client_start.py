"""What making a Python client costs: the client now (its TLS context shared a process) beside an httpx
client made as it was before (a TLS context of its own, the CA bundle loaded again), in interleaved rounds.

    .venv/bin/python -m bench.client_start [--rounds 5] [--clients 20]

Standalone: no server (a client connects only when it sends). Prints the median milliseconds to make one.
"""

import argparse
import statistics
import time
from collections.abc import Callable

import httpx
from memoryplatform_client import MemoryPlatform
from memoryplatform_client._core import client_options

URL, KEY = "https://memory.example", "mp_bench"


def now() -> None:
    MemoryPlatform(URL, KEY).close()


def before() -> None:
    options = client_options(base_url=URL, api_key=KEY, timeout=30.0, headers=None)
    options.pop("verify")  # httpx's default: a context of its own
    httpx.Client(**options).close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--clients", type=int, default=20)
    args = parser.parse_args()
    ways: dict[str, Callable[[], None]] = {"before: a TLS context a client": before, "now: one shared": now}
    times: dict[str, list[float]] = {name: [] for name in ways}
    now()  # the shared context, made once before the timing (as the first client of a process makes it)
    for _ in range(args.rounds):
        for name, make in ways.items():
            start = time.perf_counter()
            for _ in range(args.clients):
                make()
            times[name].append((time.perf_counter() - start) / args.clients * 1000)
    print("| client | ms to make one (median of rounds) |")
    print("|---|---|")
    for name, values in times.items():
        print(f"| {name} | {statistics.median(values):.2f} |")


if __name__ == "__main__":
    main()
