"""Python CPU per request of the hot endpoints, in process, on the data set ``bench.load`` filled.

Each request goes through Django's whole stack (``django.test.Client``: every middleware, DRF, the view, the
service, the SQL) in this one process, so ``time.thread_time()`` around N requests is the Python CPU they
cost, the client library's share of the SQL included and PostgreSQL's own work excluded. The SQL the process
sends through Django's connection is timed apart (``connection.execute_wrapper``, CPU inside the call), so a
row says both. ``--profile NAME`` prints cProfile's top functions of one endpoint instead.

    DATA_DIR=/work/benchdata env -u DATABASE_URL .venv/bin/python -m bench.request_cpu --n 300 --rounds 3
    DATA_DIR=/work/benchdata env -u DATABASE_URL .venv/bin/python -m bench.request_cpu --profile upsert
"""

import argparse
import cProfile
import itertools
import json
import os
import pstats
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

from bench import data, raw_sql
from bench.measure import RUN_TAG
from bench.target import resolve

Call = Callable[[], Any]


class SqlCpu:
    """CPU spent inside the statements Django's connection runs (a ``connection.execute_wrapper``)."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def __call__(self, execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        started = time.thread_time()
        try:
            return execute(sql, params, many, context)
        finally:
            self.seconds += time.thread_time() - started


def _endpoints(
    client: Any, agent_key: str, typical: str, writers: list[str], word: str, conversation: str
) -> dict[str, Call]:
    headers = {"HTTP_AUTHORIZATION": f"Bearer {agent_key}", "HTTP_HOST": "127.0.0.1"}
    seq = itertools.count()
    texts = data.TextStream(random.Random(7), data.vocabulary(random.Random(7)))
    memories = "/usermemorystore/memories"

    def get(path: str) -> Call:
        return lambda: client.get(path, **headers)

    def send(method: str, path: str, body: Callable[[], Any]) -> Call:
        return lambda: client.generic(
            method, path, json.dumps(body()), content_type="application/json", **headers
        )

    def upsert_body() -> dict[str, Any]:
        i = next(seq)
        return {"userId": writers[i % len(writers)], "key": f"cpu.{RUN_TAG}.{i}", "value": texts.value()}

    def batch_body() -> list[dict[str, Any]]:
        i = next(seq)
        user = writers[i % len(writers)]
        return [{"userId": user, "key": f"cpu.{RUN_TAG}.b{i}.{j}", "value": texts.value()} for j in range(20)]

    question = quote(f"what did the user say about {word}?")
    return {
        "recall": get(f"{memories}/{typical}/visible?order=most_recent&limit={raw_sql.RECALL_LIMIT}"),
        "upsert": send("PUT", memories, upsert_body),
        "batch of 20": send("PUT", f"{memories}/batch", batch_body),
        "search keyword": get(f"{memories}/{typical}/search?q={quote(word)}"),
        "search hybrid": get(f"{memories}/{typical}/search?q={question}&mode=hybrid&limit=10"),
        "recall with q": get(f"{memories}/{typical}/visible?q={question}"),
        "context": get(f"/v1/conversations/{conversation}/context"),
        "append": send(
            "POST",
            f"/v1/conversations/{conversation}/messages",
            lambda: {"role": "user", "content": [{"type": "text", "text": texts.value()}], "sessionId": "b"},
        ),
        "healthz": get("/healthz"),
    }


def _measure(call: Call, n: int, sql: SqlCpu) -> tuple[float, float]:
    """CPU per request and SQL CPU per request, in ms."""
    sql.seconds = 0.0
    started = time.thread_time()
    for _ in range(n):
        response = call()
        if response.status_code >= 300:
            raise SystemExit(f"{response.status_code}: {response.content[:300]!r}")
    total = time.thread_time() - started
    return 1000 * total / n, 1000 * sql.seconds / n


def _setup() -> tuple[str, str, list[str], str, str]:
    """An agent key of the bench agent, the typical user, the users written to, a word of the typical
    user's entries, and a conversation."""
    from django.db import connection

    from apikeys.caller import Caller
    from apikeys.models import ApiKey
    from apikeys.services import apikey_create
    from conversations.services import conversation_create
    from usermemory import services
    from usermemory.models import MemoryEntry

    services.policy_update(agent_id=data.BENCH_AGENT, max_writes_per_turn=100000)
    key, raw_key = apikey_create(role="agent", agent_id=data.BENCH_AGENT, label="request-cpu")
    caller = Caller.for_key(ApiKey.objects.select_related("agent").get(id=key.id))
    with connection.cursor() as cursor:  # the typical user: the median size, as bench.run picks it
        cursor.execute(raw_sql.USER_SIZES.as_string(connection.connection))
        sizes = cursor.fetchall()
    user = sizes[len(sizes) // 2][0]
    writers = [u for u, _ in sizes[len(sizes) // 5 : len(sizes) // 2]]  # writes spread, as bench.run's
    texts = MemoryEntry.objects.filter(user_id=user).values_list("value", flat=True)[:50]
    words = sorted({w for t in texts for w in str(t).split() if len(w) >= 5}) or ["bada"]
    conversation = conversation_create(caller=caller, user_id=user, title="request cpu")
    return raw_key, user, writers, words[len(words) // 2], str(conversation.id)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", default="")
    parser.add_argument("--profile", default="")
    args = parser.parse_args()
    target = resolve(os.environ.get("BENCH_DB_URL", "") if "DATABASE_URL" not in os.environ else "")
    os.environ["DATABASE_URL"] = target.url
    os.environ["DEBUG"] = "false"  # as bench.run serves: no query log
    # As ``manage.py serve`` counts its metrics: in multiprocess mode, each value in a shared file.
    os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", tempfile.mkdtemp(prefix="request-cpu-metrics-"))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from django.db import connection
    from django.test import Client

    agent_key, user, writers, word, conversation = _setup()
    calls = _endpoints(Client(), agent_key, user, writers, word, conversation)
    sql = SqlCpu()
    with connection.execute_wrapper(sql):
        for call in calls.values():  # warm: the key cache, the embedder, the prepared statements
            for _ in range(20):
                call()
        if args.profile:
            profile = cProfile.Profile(time.thread_time)  # CPU, not waits
            profile.runcall(lambda: [calls[args.profile]() for _ in range(args.n)])
            profile.dump_stats(Path(tempfile.gettempdir()) / f"prof_{args.profile.replace(' ', '_')}.pstats")
            pstats.Stats(profile).sort_stats("cumulative").print_stats(60)
            pstats.Stats(profile).sort_stats("tottime").print_stats(40)
            return
        results: dict[str, list[tuple[float, float]]] = {name: [] for name in calls}
        for _ in range(args.rounds):
            for name, call in calls.items():
                if args.only in name:
                    results[name].append(_measure(call, args.n, sql))
    heading = f"median of {args.rounds} x {args.n}"
    print(f"| endpoint | CPU ms / request ({heading}) | of it in SQL calls | over SQL |")
    print("|---|---|---|---|")
    for name, measured in results.items():
        if measured:
            total = statistics.median(r[0] for r in measured)
            in_sql = statistics.median(r[1] for r in measured)
            print(f"| {name} | {total:.2f} | {in_sql:.2f} | {total - in_sql:.2f} |")


if __name__ == "__main__":
    main()
