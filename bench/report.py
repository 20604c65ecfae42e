"""The median of several ``bench.run`` results, as the tables of one run, and each target over the runs.

    .venv/bin/python -m bench.report /tmp/run1.json /tmp/run2.json /tmp/run3.json

Every figure is the median, over the runs, of the same figure in each run (a latency, a throughput). Each
target is judged on those medians, and also in every run on its own figures (ratios are taken within a run,
so a noisy minute affects both doors alike); both verdicts are printed.
"""

import argparse
import json
import statistics
import sys
from typing import Any

from bench.results import report, targets


def _median(values: list[Any]) -> Any:
    """The median of the runs' values at one place in the results (the first, where it is not a number)."""
    first = values[0]
    if isinstance(first, dict):
        return {key: _median([v[key] for v in values if key in v]) for key in first}
    if isinstance(first, list) and all(isinstance(v, list) and len(v) == len(first) for v in values):
        return [_median(list(items)) for items in zip(*values, strict=True)]
    if isinstance(first, bool) or not isinstance(first, int | float):
        return first
    numbers = [v for v in values if isinstance(v, int | float) and v == v]  # NaN is not a measurement
    if not numbers:
        return first
    middle = statistics.median(numbers)
    return round(middle) if all(isinstance(v, int) for v in numbers) else middle


def median_results(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return _median(runs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("runs", nargs="+", help="result files written by bench.run --out")
    args = parser.parse_args(argv)
    runs = []
    for path in args.runs:
        with open(path) as handle:
            runs.append(json.load(handle))
    merged = median_results(runs) | {"targets": []}  # judged below, on the medians and in each run
    print(f"Median of {len(runs)} runs: {', '.join(args.runs)}\n")
    print(report(merged))
    print("\nTargets (on the medians; then in each run):\n")
    per_run = [targets(run) for run in runs]
    for index, (text, ok) in enumerate(targets(merged)):
        verdicts = [
            ("met" if run_targets[index][1] else "not met") if index < len(run_targets) else "?"
            for run_targets in per_run
        ]
        print(f"- [{'met' if ok else 'NOT met'}] {text} (runs: {', '.join(verdicts)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
