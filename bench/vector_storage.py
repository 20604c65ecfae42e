"""Vectors stored as ``vector`` (float4) beside ``halfvec`` (float2) on the same LoCoMo rows (issue 31).

    env -u DATABASE_URL .venv/bin/python -m bench.vector_storage ../shared/data/locomo/locomo-dev5.json \\
        [--modes semantic,hybrid] [--db-url URL] [--out /tmp/halfvec.json]

The conversations are loaded as ``bench.recall_quality`` loads them (one user's memories per conversation),
with the vector tables taken back to ``vector`` first (usermemory 0019, conversations 0004: the reverse of
the ``halfvec`` migrations), so that every turn is embedded once, at full precision. Every question of
categories 1-4 is asked through the ranked search service (``memory_search_ranked``, top 10, no threshold)
in each mode; then the migrations convert the same rows in place (``ALTER COLUMN ... TYPE halfvec``, timed)
and every question is asked again. The search statements are the same on both sides: the query's literal is
typed ``vector`` and pgvector converts it once to the column's type, so each side computes its distances at
its storage's precision.

Reported per side and mode: hit@5, hit@10, recall@5, MRR@10, the p50 latency, the share of questions whose
top 10 is the same list in the same order, and the vector table's size (``pg_total_relation_size``, after a
``VACUUM FULL`` on the float side so that neither side counts dead rows).
"""

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

from bench import locomo
from bench.recall_quality import Platform

FLOAT_TARGETS = (("usermemory", "0021_group_unique_holds_user"), ("conversations", "0005_vector_queue"))
HALF_TARGETS = (("usermemory", "0022_halfvec_embeddings"), ("conversations", "0006_halfvec_embeddings"))
TABLE = "usermemory_entryembedding"
SIZE_SQL = f"""SELECT pg_total_relation_size('{TABLE}'), count(*),
    (SELECT format_type(atttypid, atttypmod) FROM pg_attribute
     WHERE attrelid = '{TABLE}'::regclass AND attname = 'embedding')
    FROM {TABLE}"""
LIMIT = 10


def log(message: str) -> None:
    print(f"[vector_storage {time.strftime('%H:%M:%S')}] {message}", flush=True)


def migrate_to(targets: tuple[tuple[str, str], ...]) -> float:
    """Migrate each app to its target; returns the seconds it took."""
    from django.core.management import call_command

    started = time.perf_counter()
    for app, name in targets:
        call_command("migrate", app, name, verbosity=0, interactive=False)
    return time.perf_counter() - started


def table_size(*, vacuum_full: bool) -> dict[str, Any]:
    from django.db import connection

    with connection.cursor() as cursor:
        if vacuum_full:
            cursor.execute(f"VACUUM FULL {TABLE}")
        cursor.execute(SIZE_SQL)
        size, rows, column = cursor.fetchone()
    return {"bytes": int(size), "rows": int(rows), "column": str(column)}


def ask_all(
    platform: Platform, conversations: list[locomo.Conversation], mode: str
) -> tuple[locomo.Score, list[list[str]]]:
    """Every question of its own user, top 10: the score and each question's ranked keys."""
    from usermemory import selectors

    score = locomo.Score()
    lists: list[list[str]] = []
    for conv in conversations:
        for question in conv.questions[:3]:  # warm-up, not measured
            selectors.memory_search_ranked(
                caller=platform.caller, user_id=conv.user_id, query=question.text, mode=mode, limit=LIMIT
            )
        for question in conv.questions:
            started = time.perf_counter()
            found = selectors.memory_search_ranked(
                caller=platform.caller,
                user_id=conv.user_id,
                query=question.text,
                mode=mode,
                limit=LIMIT,
                min_score=0.0,
            )
            ranked = [s.entry.key for s in found.entries]
            score.add(question, ranked, time.perf_counter() - started)
            lists.append(ranked)
    return score, lists


def side(platform: Platform, conversations: list[locomo.Conversation], modes: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for mode in modes:
        score, lists = ask_all(platform, conversations, mode)
        out[mode] = {"summary": score.summary(), "lists": lists}
        s = out[mode]["summary"]
        log(f"{mode}: hit@5 {s['hit@5']:.3f} hit@10 {s['hit@10']:.3f} mrr@10 {s['mrr@10']:.3f}")
    return out


def report(results: dict[str, Any]) -> str:
    metrics = ("hit@5", "hit@10", "recall@5", "mrr@10")
    lines = [
        "| mode | storage | " + " | ".join(metrics) + " | p50 ms | same top 10 as float |",
        "|---|---|" + "---|" * (len(metrics) + 2),
    ]
    for mode in results["modes"]:
        float_side, half_side = results["float"][mode], results["half"][mode]
        same = sum(a == b for a, b in zip(float_side["lists"], half_side["lists"], strict=True))
        share = same / max(1, len(float_side["lists"]))
        for name, r, agree in (("vector", float_side, "-"), ("halfvec", half_side, f"{share:.3f}")):
            s = r["summary"]
            cells = " | ".join(f"{s[m]:.4f}" for m in metrics)
            lines.append(f"| {mode} | {name} | {cells} | {s['p50_ms']:.1f} | {agree} |")
        f, h = float_side["summary"], half_side["summary"]
        lines.append(
            f"| {mode} | difference | " + " | ".join(f"{h[m] - f[m]:+.4f}" for m in metrics) + " | | |"
        )
    fs, hs = results["float_size"], results["half_size"]
    lines += [
        "",
        f"{TABLE}: {fs['rows']} rows; {fs['column']} {fs['bytes'] / 1e6:.2f} MB, "
        f"{hs['column']} {hs['bytes'] / 1e6:.2f} MB ({hs['bytes'] / fs['bytes']:.2f} of it); "
        f"the conversion (both migrations) took {results['convert_s']:.2f} s",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("path", type=Path)
    parser.add_argument("--modes", default="semantic,hybrid")
    parser.add_argument("--db-url", default="")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    modes = args.modes.split(",")
    conversations = locomo.load(args.path)
    platform = Platform(args.db_url or os.environ.get("DATABASE_URL", ""), name="bench_vector_storage")
    migrate_to(FLOAT_TARGETS)
    for conv in conversations:
        platform.write(conv)
    log(f"{len(conversations)} conversations written; vectors (float4) in {platform.embed():.1f} s")
    results: dict[str, Any] = {"data": str(args.path), "modes": modes}
    results["float_size"] = table_size(vacuum_full=True)
    results["float"] = side(platform, conversations, modes)
    results["convert_s"] = migrate_to(HALF_TARGETS)
    results["half_size"] = table_size(vacuum_full=False)
    log(f"converted to halfvec in place in {results['convert_s']:.2f} s")
    results["half"] = side(platform, conversations, modes)
    if args.out:
        args.out.write_text(json.dumps(results, indent=2))
    print(report(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
