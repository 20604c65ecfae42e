"""The ranked search side by side: second stages (rerankers) by depth, the threshold, off-topic questions.

    env -u DATABASE_URL .venv/bin/python -m bench.ranking ../shared/data/locomo/locomo-dev5.json \\
        [--rerankers none,local:<model>,http:<url>] [--depths 20,30,50] [--mode hybrid] [--out /tmp/r.json]

The conversations are loaded as ``bench.recall_quality`` loads them (one user's memories per conversation,
every turn with its vector). Then, for each configuration (a reranker at a depth, or none), every question of
categories 1-4 is asked through the search service (``memory_search_ranked``, no threshold):

- of its own conversation's user, for hit@5, hit@10, recall@5 and the latency (p50, p95);
- of the next conversation's user (off-topic: nothing there answers it), for the scores an unrelated
  question gets.

For each threshold of a grid, the report gives hit@5 counting only results at or above it, and the median
number of off-topic results at or above it (of the first 50), so that a default ``minScore`` can be read off:
the highest threshold whose hit@5 is within 0.02 of no threshold, and whether the median off-topic question
then finds nothing. The column ``default`` asks each question again through the recall by relevance (the
service of ``/visible?q=``) with no minScore: the platform's default, the best ``recallTopK`` (5), no cut."""

import argparse
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

from bench import locomo
from bench.recall_quality import Platform

THRESHOLDS = (0.0, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
OFF_TOPIC_LIMIT = 50


def log(message: str) -> None:
    print(f"[ranking {time.strftime('%H:%M:%S')}] {message}", flush=True)


def configure(reranker: str, depth: int) -> None:
    """Point the process's settings at one second stage (``none``, ``local:<model>``, ``http:<url>``)."""
    from django.conf import settings

    from memoryplatform.rerank import get_reranker

    provider, _, where = reranker.partition(":")
    settings.RERANK_PROVIDER = provider
    settings.RERANK_DEPTH = depth
    settings.RERANK_MODEL = where if provider == "local" else ""
    settings.RERANK_URL = where if provider == "http" else ""
    get_reranker.cache_clear()


def ask(platform: Platform, user_id: str, question: str, *, mode: str, limit: int) -> tuple[list[Any], float]:
    from usermemory import selectors

    started = time.perf_counter()
    found = selectors.memory_search_ranked(
        caller=platform.caller, user_id=user_id, query=question, mode=mode, limit=limit, min_score=0.0
    )
    return [(s.entry.key, s.score) for s in found.entries], time.perf_counter() - started


def recall(platform: Platform, user_id: str, question: str, *, mode: str) -> list[str]:
    """The keys a recall by relevance gives by default (``/visible?q=``'s service: the best ``recallTopK``,
    no cut)."""
    from usermemory import services

    found = services.memory_recall_ranked(caller=platform.caller, user_id=user_id, query=question, mode=mode)
    return [s.entry.key for s in found.entries]


def measure(platform: Platform, conversations: list[locomo.Conversation], *, mode: str) -> dict[str, Any]:
    on_topic: list[tuple[locomo.Question, list[Any]]] = []
    off_topic: list[list[float]] = []
    latencies: list[float] = []
    default = locomo.Score()
    default_off: list[int] = []
    for index, conv in enumerate(conversations):
        other = conversations[(index + 1) % len(conversations)]
        for question in conv.questions[:3]:  # warm-up, not measured
            ask(platform, conv.user_id, question.text, mode=mode, limit=10)
        for question in conv.questions:
            ranked, seconds = ask(platform, conv.user_id, question.text, mode=mode, limit=10)
            on_topic.append((question, ranked))
            latencies.append(seconds)
            unrelated, _ = ask(platform, other.user_id, question.text, mode=mode, limit=OFF_TOPIC_LIMIT)
            off_topic.append([score for _, score in unrelated])
            default.add(question, recall(platform, conv.user_id, question.text, mode=mode), 0.0)
            default_off.append(len(recall(platform, other.user_id, question.text, mode=mode)))
    by_threshold = {}
    for threshold in THRESHOLDS:
        score = locomo.Score()
        for question, ranked in on_topic:
            score.add(question, [key for key, s in ranked if s >= threshold], 0.0)
        counts = [sum(1 for s in scores if s >= threshold) for scores in off_topic]
        summary = score.summary()
        by_threshold[str(threshold)] = {
            "hit@5": summary["hit@5"],
            "hit@10": summary["hit@10"],
            "recall@5": summary["recall@5"],
            "off_topic_median": statistics.median(counts),
            "off_topic_none": sum(1 for c in counts if c == 0) / len(counts),
        }
    summary = default.summary()
    by_threshold["default"] = {
        "hit@5": summary["hit@5"],
        "hit@10": summary["hit@10"],
        "recall@5": summary["recall@5"],
        "off_topic_median": statistics.median(default_off),
        "off_topic_none": sum(1 for c in default_off if c == 0) / len(default_off),
    }
    return {
        "p50_ms": locomo.percentile(latencies, 50) * 1000,
        "p95_ms": locomo.percentile(latencies, 95) * 1000,
        "by_threshold": by_threshold,
    }


def report(results: dict[str, Any]) -> str:
    lines = [
        "| second stage | depth | hit@5 | hit@10 | recall@5 | p50 ms | p95 ms | default minScore "
        "| hit@5 there | off-topic median there | off-topic with none |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in results["configurations"].items():
        base = r["by_threshold"]["0.0"]
        ok = [t for t in THRESHOLDS if r["by_threshold"][str(t)]["hit@5"] >= base["hit@5"] - 0.02]
        best = max(ok)
        there = r["by_threshold"][str(best)]
        reranker, depth = name.rsplit("@", 1)
        lines.append(
            f"| {reranker} | {depth} | {base['hit@5']:.3f} | {base['hit@10']:.3f} | {base['recall@5']:.3f} "
            f"| {r['p50_ms']:.1f} | {r['p95_ms']:.1f} | {best} | {there['hit@5']:.3f} "
            f"| {there['off_topic_median']} | {there['off_topic_none']:.2f} |"
        )
    columns = [str(t) for t in THRESHOLDS] + ["default"]
    lines += ["", "| configuration | " + " | ".join(columns) + " |"]
    lines.append("|---|" + "---|" * len(columns))
    for name, r in results["configurations"].items():
        at = r["by_threshold"]
        cells = " | ".join(f"{at[t]['hit@5']:.3f} / {at[t]['off_topic_median']}" for t in columns)
        lines.append(f"| {name} (hit@5 / off-topic median) | {cells} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("path", type=Path)
    parser.add_argument(
        "--rerankers", default="none", help="none, local:<model>, http:<url>; comma-separated"
    )
    parser.add_argument("--depths", default="30", help="rerank depths, comma-separated")
    parser.add_argument("--mode", default="hybrid", choices=("semantic", "hybrid"))
    parser.add_argument("--db-url", default="")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    conversations = locomo.load(args.path)
    platform = Platform(args.db_url or os.environ.get("DATABASE_URL", ""))
    for conv in conversations:
        platform.write(conv)
    log(f"{len(conversations)} conversations written; vectors in {platform.embed():.1f} s")
    configurations: dict[str, Any] = {}
    for reranker in args.rerankers.split(","):
        for depth in [int(d) for d in args.depths.split(",")] if reranker != "none" else [0]:
            configure(reranker, max(depth, 1))
            name = f"{reranker}@{depth}"
            configurations[name] = measure(platform, conversations, mode=args.mode)
            base = configurations[name]["by_threshold"]["0.0"]
            log(f"{name}: hit@5 {base['hit@5']:.3f}, p50 {configurations[name]['p50_ms']:.1f} ms")
    results = {"data": str(args.path), "mode": args.mode, "configurations": configurations}
    print(report(results))
    if args.out:
        args.out.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
