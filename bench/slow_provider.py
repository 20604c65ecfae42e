"""What a slow provider costs the other agents (issue 53, finding 5).

    env -u DATABASE_URL .venv/bin/python -m bench.slow_provider [--seconds 20] [--flood 7] [--trickle 1]

``manage.py serve`` (2 workers of 4 threads, as ``make run``) on a database of its own in the embedded
server of DATA_DIR, its LLM the scripted server of ``tests/llm_server.py`` answering a byte every
``--trickle`` seconds (``LLM_TIMEOUT`` 30 s, so a call holds its thread until then). One agent floods
``--flood`` extract calls at once, again as each ends (after a 429, when its ``Retry-After`` has passed, as a
client that honours it); meanwhile another agent reads ``/visible`` in a loop, one call at a time (after
20 reads before the flood, not counted, so no worker's first request is). Two
conditions, one server each: ``unbounded`` (``PROVIDER_CALLS_PER_AGENT`` 100, no bound in effect: as before
the bound) and ``bounded`` (the default, 2). Printed: the reader's p50 and max, and the flood's answers.
"""

import argparse
import http.client
import json
import statistics
import threading
import time
from collections import Counter
from pathlib import Path

from bench import target
from bench.http_door import Server
from bench.measure import log, percentile
from tests.llm_server import Answer, LLMScript, llm_server

DB_NAME = "bench_slow_provider"
WARM_UP = 20  # reads before the flood, not counted
CHAT = [{"role": "user", "content": "I moved to Lisbon last month.", "id": "m1"}]
ANSWER = {"facts": [{"key": "home_city", "value": "Lisbon", "category": "fact", "confidence": 0.9}]}


def _call(port: int, key: str, method: str, path: str, body: object = None) -> tuple[int, dict[str, str]]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
        conn.request(method, path, None if body is None else json.dumps(body), headers)
        response = conn.getresponse()
        response.read()
        return response.status, {k.lower(): v for k, v in response.getheaders()}
    finally:
        conn.close()


def _flood(port: int, key: str, stop: threading.Event, answers: Counter[int]) -> None:
    while not stop.is_set():
        status, headers = _call(port, key, "POST", "/usermemorystore/memories/u1/extract", {"messages": CHAT})
        answers[status] += 1
        if status == 429:
            stop.wait(float(headers.get("retry-after", "1")))


def _measure(
    args: argparse.Namespace, db: target.Target, keys: tuple[str, str], llm_url: str, share: int
) -> dict[str, object]:
    env = {
        "LLM_PROVIDER": "openai",
        "LLM_URL": llm_url,
        "LLM_MODEL": "bench-model",
        "LLM_TIMEOUT": "30",
        "PROVIDER_CALLS_PER_AGENT": str(share),
    }
    server = Server(db.url, Path(args.log), env)
    server.start()
    flooding, reading = keys
    stop = threading.Event()
    answers: Counter[int] = Counter()
    floods = [
        threading.Thread(target=_flood, args=(server.port, flooding, stop, answers))
        for _ in range(args.flood)
    ]
    try:
        for _ in range(WARM_UP):  # both workers have answered the reader once: no first-request cost counted
            _call(server.port, reading, "GET", "/usermemorystore/memories/u1/visible")
        for thread in floods:
            thread.start()
        time.sleep(2)  # the flood reaches the model before the reads start
        latencies: list[float] = []
        deadline = time.monotonic() + args.seconds
        while time.monotonic() < deadline:
            started = time.perf_counter()
            status, _ = _call(server.port, reading, "GET", "/usermemorystore/memories/u1/visible")
            latencies.append((time.perf_counter() - started) * 1000)
            assert status == 200, status
    finally:
        stop.set()
        for thread in floods:
            thread.join()
        server.stop()
    return {
        "reads": len(latencies),
        "p50_ms": round(statistics.median(latencies), 1),
        "p99_ms": round(percentile(latencies, 99), 1),
        "max_ms": round(max(latencies), 1),
        "flood_answers": dict(answers),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="of reads a condition")
    parser.add_argument("--flood", type=int, default=7, help="extract calls the flooding agent keeps open")
    parser.add_argument("--trickle", type=float, default=1.0, help="seconds between the model's bytes")
    parser.add_argument("--log", default="var/bench-slow-provider.log")
    args = parser.parse_args(argv)

    db = target.resolve("", name=DB_NAME)
    target.create(db, reset=True)
    target.django_setup(db)
    from django.core.management import call_command

    from apikeys.services import agent_create, apikey_create

    call_command("migrate", verbosity=0)
    for agent in ("flooder", "reader"):
        agent_create(agent_id=agent)
    keys = (
        apikey_create(role="agent", agent_id="flooder")[1],
        apikey_create(role="agent", agent_id="reader")[1],
    )
    results = {}
    with llm_server(LLMScript([Answer(ANSWER, trickle=args.trickle)])) as script:
        for name, share in (("unbounded", 100), ("bounded", 2)):
            results[name] = _measure(args, db, keys, script.url, share)
            log(f"{name}: {results[name]}")
    print(json.dumps(results, indent=2))
    target.drop(db)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
