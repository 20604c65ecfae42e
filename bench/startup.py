"""Start to ready of ``manage.py serve --workers 2`` (as ``make run``: with its background work, whatever each
checkout runs for it), alternately from two checkouts (before and after a change): seconds from the start to
the first 200 of ``/readyz``, and to the first answer of ``/mcp/`` (a 401 without a key: the MCP app is
loaded). Each checkout serves its own code; both use DATA_DIR's database, which must be migrated.

    DATA_DIR=<dir> .venv/bin/python -m bench.startup <before checkout> <after checkout> [--rounds 3]
"""

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def answered(url: str, data: bytes | None = None) -> int | None:
    """The status of one request, or None when nothing answered yet."""
    request = urllib.request.Request(url, data=data, method="POST" if data else "GET")  # noqa: S310
    try:
        with urllib.request.urlopen(request, timeout=5) as response:  # noqa: S310 (loopback)
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)
    except (urllib.error.URLError, OSError):
        return None


def start_to_ready(checkout: str) -> tuple[float, float]:
    port = free_port()
    env = os.environ | {"PYTHONPATH": checkout, "DEBUG": "false"}
    argv = [
        sys.executable,
        "manage.py",
        "serve",
        "--port",
        str(port),
        "--workers",
        "2",
    ]
    started = time.monotonic()
    server = subprocess.Popen(  # noqa: S603 (this interpreter, fixed arguments)
        argv,
        cwd=checkout,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        while answered(f"http://127.0.0.1:{port}/readyz") != 200:
            if server.poll() is not None:
                raise SystemExit(f"serve in {checkout} exited with {server.returncode}")
            time.sleep(0.05)
        ready = time.monotonic() - started
        while answered(f"http://127.0.0.1:{port}/mcp/", b"{}") is None:
            time.sleep(0.05)
        return ready, time.monotonic() - started
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("checkouts", nargs=2, help="before and after")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    results: dict[str, list[tuple[float, float]]] = {checkout: [] for checkout in args.checkouts}
    for round_no in range(args.rounds):
        order = args.checkouts if round_no % 2 == 0 else args.checkouts[::-1]
        for checkout in order:
            ready, mcp = start_to_ready(checkout)
            results[checkout].append((ready, mcp))
            load = os.getloadavg()[0]
            print(f"{checkout}: ready {ready:.1f} s, /mcp/ {mcp:.1f} s (load {load:.1f})", flush=True)
    for checkout, times in results.items():
        print(
            f"{checkout}: ready median {statistics.median(t[0] for t in times):.1f} s, "
            f"/mcp/ median {statistics.median(t[1] for t in times):.1f} s"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
