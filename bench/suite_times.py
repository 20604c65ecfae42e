"""The test suite's time per folder, from the JUnit XML that ``pytest --junitxml`` writes (issue 54).

    .venv/bin/pytest -p no:cacheprovider -q --junitxml=/tmp/suite.xml
    .venv/bin/python -m bench.suite_times /tmp/suite.xml

Each test case's time (its setup, call and teardown) is summed under its folder (``tests/usermemory``,
``clients/python/tests``), and under its module for the slowest modules. Under pytest-xdist the sum is the
workers' time, not the wall clock: it says where the time goes, the wall clock says how long one waits.
"""

import argparse
import xml.etree.ElementTree as ET  # noqa: S405  (our own pytest's report, not untrusted input)
from collections import Counter, defaultdict
from pathlib import Path


def times(report: Path) -> tuple[dict[str, float], dict[str, float], Counter[str]]:
    """Seconds per folder, seconds per module and test cases per folder."""
    per_folder: defaultdict[str, float] = defaultdict(float)
    per_module: defaultdict[str, float] = defaultdict(float)
    cases: Counter[str] = Counter()
    for case in ET.parse(report).getroot().iter("testcase"):  # noqa: S314
        module = case.get("classname", "").split("::")[0]
        parts = module.split(".")
        # the dotted module (and class): tests.usermemory.test_x.TestY, clients.python.tests.test_x
        depth = 3 if parts[:1] == ["clients"] else 2
        folder = "/".join(parts[:depth])
        name = "/".join(part for part in parts if not part[:1].isupper()) + ".py"
        seconds = float(case.get("time") or 0)
        per_folder[folder] += seconds
        per_module[name] += seconds
        cases[folder] += 1
    return per_folder, per_module, cases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("report", type=Path, help="the JUnit XML file of a pytest run")
    parser.add_argument("--modules", type=int, default=15, help="how many of the slowest modules to list")
    args = parser.parse_args()
    per_folder, per_module, cases = times(args.report)
    total = sum(per_folder.values())
    print("| folder | tests | seconds | share |\n|---|---|---|---|")
    for folder, seconds in sorted(per_folder.items(), key=lambda item: -item[1]):
        print(f"| {folder} | {cases[folder]} | {seconds:.0f} | {seconds / total:.0%} |")
    print(f"| total | {sum(cases.values())} | {total:.0f} | |\n")
    print("| module | seconds |\n|---|---|")
    for name, seconds in sorted(per_module.items(), key=lambda item: -item[1])[: args.modules]:
        print(f"| {name} | {seconds:.0f} |")


if __name__ == "__main__":
    main()
