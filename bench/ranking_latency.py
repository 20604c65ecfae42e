"""Latency of the ranked search on the data ``bench.ranking`` (or ``bench.recall_quality``) left loaded,
without loading it again: every question of categories 1-4 asked of its user, hybrid, through the search
service and through HTTP (``manage.py serve``), one client, after a warm-up.

    env -u DATABASE_URL .venv/bin/python -m bench.ranking_latency ../shared/data/locomo/locomo-dev5.json

The database is ``bench_recall`` of the embedded server in DATA_DIR (or ``--db-url``); nothing is written
but a new key of the bench's agent."""

import argparse
import functools
import os
from pathlib import Path

from bench import locomo, target
from bench.recall_quality import AGENT, DB_NAME, http_ranker, run_system

MODES = {"keyword": True, "semantic": True, "hybrid": True}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("path", type=Path)
    parser.add_argument("--db-url", default="")
    args = parser.parse_args(argv)
    conversations = locomo.load(args.path)
    where = target.resolve(args.db_url or os.environ.get("DATABASE_URL", ""), name=DB_NAME)
    if not target.exists(where):
        raise SystemExit(f"{DB_NAME} is missing: run bench.ranking (or bench.recall_quality) first")
    target.django_setup(where)
    from django.core.management import call_command

    from apikeys.caller import Caller
    from apikeys.models import ApiKey
    from apikeys.services import apikey_create
    from bench.http_door import Server
    from usermemory import selectors

    call_command("migrate", verbosity=0, interactive=False)  # the data's schema follows the code's
    key, raw_key = apikey_create(role="agent", agent_id=AGENT, label="latency")
    caller = Caller.for_key(ApiKey.objects.select_related("agent").get(id=key.id))

    def service(conversation: locomo.Conversation) -> locomo.Ranker:
        def rank(question: str, k: int) -> list[str]:
            found = selectors.memory_search_ranked(
                caller=caller, user_id=conversation.user_id, query=question, mode="hybrid", limit=k
            )
            return [s.entry.key for s in found.entries]

        return rank

    scores: dict[str, locomo.Score] = {}
    run_system("hybrid service", conversations, service, scores)
    server = Server(where.url, Path("var") / "bench-latency-serve.log")
    server.start()
    try:
        make = functools.partial(http_ranker, port=server.port, raw_key=raw_key, mode="hybrid", modes=MODES)
        run_system("hybrid http", conversations, make, scores)
    finally:
        server.stop()
    print("| door | hit@5 | p50 ms | p95 ms | n |\n|---|---|---|---|---|")
    for name, score in scores.items():
        s = score.summary()
        print(f"| {name} | {s['hit@5']:.3f} | {s['p50_ms']:.1f} | {s['p95_ms']:.1f} | {s['n']} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
