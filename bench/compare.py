"""Two ``bench.run`` results side by side: before and after a change, on the same data set.

    .venv/bin/python -m bench.compare /tmp/before.json /tmp/after.json

For each operation and door: the one-client median latency, the throughput with N clients, and the ratios
that compare within a run (HTTP throughput over raw, the service's median over raw), so that a noisier minute
in one run weighs less than it would on absolute figures. Then the upsert tails, each side by side.
"""

import argparse
import json
import sys
from typing import Any

from bench.results import fmt

DOORS = ("raw", "service", "http")


def _phase(result: dict[str, Any], op: str, door: str, phase: str) -> dict[str, Any] | None:
    return result["ops"].get(op, {}).get(door, {}).get(phase)


def _ratios(result: dict[str, Any], op: str) -> tuple[float | None, float | None]:
    """HTTP throughput / raw throughput (N clients), and service p50 / raw p50 (one client)."""
    raw_n, http_n = _phase(result, op, "raw", "cN"), _phase(result, op, "http", "cN")
    raw_1, service_1 = _phase(result, op, "raw", "c1"), _phase(result, op, "service", "c1")
    http_raw = http_n["rps"] / raw_n["rps"] if raw_n and http_n and raw_n["rps"] else None
    service_raw = service_1["p50_ms"] / raw_1["p50_ms"] if raw_1 and service_1 and raw_1["p50_ms"] else None
    return http_raw, service_raw


def _num(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else fmt(value, digits)


def _get(phase: dict[str, Any] | None, field: str) -> float | None:
    return None if phase is None else phase[field]


def compare(before: dict[str, Any], after: dict[str, Any]) -> str:
    lines = [
        "| operation | door | p50 ms before | p50 ms after | req/s (N clients) before | after |",
        "|---|---|---|---|---|---|",
    ]
    for op in after["ops"]:
        for door in DOORS:
            b1, a1 = _phase(before, op, door, "c1"), _phase(after, op, door, "c1")
            bn, an = _phase(before, op, door, "cN"), _phase(after, op, door, "cN")
            if not (b1 or a1):
                continue
            lines.append(
                f"| {op} | {door} | {_num(_get(b1, 'p50_ms'))} | {_num(_get(a1, 'p50_ms'))} "
                f"| {_num(_get(bn, 'rps'), 0)} | {_num(_get(an, 'rps'), 0)} |"
            )
    lines += [
        "",
        "| operation | http/raw req/s before | after | service/raw p50 before | after |",
        "|---|---|---|---|---|",
    ]
    for op in after["ops"]:
        (b_http, b_service), (a_http, a_service) = _ratios(before, op), _ratios(after, op)
        lines.append(f"| {op} | {_num(b_http)} | {_num(a_http)} | {_num(b_service)} | {_num(a_service)} |")
    lines += ["", "| upsert tail | p50 ms before | after | p99.9 ms before | after |"]
    lines += ["|---|---|---|---|---|"]
    for name, tail in after.get("tail", {}).items():
        old = before.get("tail", {}).get(name) or before.get("tail", {}).get(f"{name} (fastupdate=off)")
        lines.append(
            f"| {name} | {_num(_get(old, 'p50_ms'))} | {_num(tail['p50_ms'])} "
            f"| {_num(_get(old, 'p999_ms'))} | {_num(tail['p999_ms'])} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("before", help="a result file written by bench.run --out")
    parser.add_argument("after", help="another, of the same data set")
    args = parser.parse_args(argv)
    with open(args.before) as b, open(args.after) as a:
        print(compare(json.load(b), json.load(a)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
