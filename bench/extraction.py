"""Memory formation on LoCoMo: conversations through extraction, then the questions against the extracted
facts with hybrid search.

    env -u DATABASE_URL .venv/bin/python -m bench.extraction ../shared/data/locomo/locomo-dev5.json \\
        [--conversations 2] [--batch 20] [--scripted] [--out /tmp/extraction.json]
    env -u DATABASE_URL .venv/bin/python -m bench.extraction --smoke     # CI: a tiny built-in sample

Each conversation's turns go, ``--batch`` at a time (each turn a user message whose id is its ``dia_id``),
through the extraction service (``extraction.extract.memory_extract``) with the LLM the settings describe
(``LLM_PROVIDER``, ``LLM_MODEL``, ``LLM_URL``, ``LLM_API_KEY``, ``LLM_PRICES``), as one agent, in a fresh
database (``bench_extraction``; ``bench/target.py``). Every question of categories 1-4 is then asked with
hybrid search (``usermemory.selectors.memory_search``, ``mode=hybrid``) over the user's extracted facts.

A retrieved fact counts for hit@k when the provenance of its current value (the ``messageIds`` of its latest
history event) cites an evidence turn of the question. Reported: hit@5 and hit@10 (overall and per
category), the facts added, updated and unchanged, the calls, failures and their cost (from the provider's
usage), and the time taken.

``--scripted`` (and ``--smoke``) stand a scripted OpenAI-compatible server in for the LLM: it proposes one
fact per message (a key from the message's longest words, the message as the value), so its numbers measure
the plumbing and the search over facts that cite their turns, not a model. No LLM is reachable on the
machine that wrote this; RESULTS.md gives the command for a real one.
"""

import argparse
import json
import os
import re
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from bench import locomo, target
from bench.locomo import CATEGORIES, Conversation
from bench.recall_quality import Platform

DB_NAME = "bench_extraction"
KS = (5, 10)
SCRIPTED_MODEL = "scripted-extractor"
_MESSAGE = re.compile(r"^<message (\d+)> (\w+): (\".*\") </message \1>$")
_WORD = re.compile(r"[a-z]{3,}")


def log(message: str) -> None:
    print(f"[extraction {time.strftime('%H:%M:%S')}] {message}", flush=True)


# --- The scripted model ------------------------------------------------------------------------------


def scripted_facts(prompt: str) -> dict[str, Any]:
    """One fact per message of the prompt: key from its two longest words, value the message's text."""
    facts = []
    for line in prompt.splitlines():
        found = _MESSAGE.match(line)
        if not found:
            continue
        text = json.loads(found[3]).split("] ", 1)[-1]
        words = sorted(set(_WORD.findall(text.lower())), key=lambda w: (-len(w), w))[:2]
        key = "_".join(sorted(words)) or f"message_{found[1]}"
        facts.append({"key": key, "value": text[:900], "category": "fact", "confidence": 0.5,
                      "sources": [int(found[1])]})  # fmt: skip
    return {"facts": facts}


_SOURCE = re.compile(r"^\[(\d+)\] ([^:]+): (.*)$")
_GROUP = re.compile(r"share the '([^']*)' group")


def scripted_summaries(prompt: str) -> dict[str, Any]:
    """Dream's summary prompt answered with one summary of every entry it lists: its key from the group's
    label, its value the entries' texts joined (cut to a few hundred characters), its sources all of them."""
    lines = [found for line in prompt.splitlines() if (found := _SOURCE.match(line))]
    label = (_GROUP.search(prompt) or [None, "facts"])[1] or "facts"
    value = "; ".join(f"{found[2]}: {found[3]}" for found in lines)[:600]
    return {"summaries": [{"key": f"summary of {label}"[:100], "value": value or "nothing",
                           "sources": [int(found[1]) for found in lines]}]}  # fmt: skip


def scripted_answer(prompt: str) -> dict[str, Any]:
    """Dream's summary prompts get :func:`scripted_summaries`, every other one :func:`scripted_facts`."""
    return scripted_summaries(prompt) if _GROUP.search(prompt) else scripted_facts(prompt)


@contextmanager
def scripted_llm(port: int = 0) -> Iterator[str]:
    """An OpenAI-compatible chat-completions server answering with :func:`scripted_answer` (on ``port``, 0: a
    free one); its base URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            prompt = body["messages"][-1]["content"]
            text = json.dumps(scripted_answer(prompt))
            payload = {
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}}],
                "usage": {"prompt_tokens": len(prompt) // 4, "completion_tokens": len(text) // 4},
            }
            raw = json.dumps(payload).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


# --- The smoke's sample (LoCoMo's shape, written for this bench) ---------------------------------------

SMOKE_SAMPLE = {
    "sample_id": "smoke",
    "conversation": {
        "session_1_date_time": "1:00 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Ana", "dia_id": "D1:1", "text": "I finally moved to Lisbon last month!"},
            {"speaker": "Ben", "dia_id": "D1:2", "text": "Congrats! Are you still working as a nurse?"},
            {"speaker": "Ana", "dia_id": "D1:3", "text": "Yes, night shifts at the children's hospital."},
            {"speaker": "Ben", "dia_id": "D1:4", "text": "I started learning the violin, it is hard."},
            {"speaker": "Ana", "dia_id": "D1:5", "text": "My sister Clara visits me in June."},
        ],
        "session_2_date_time": "2:00 pm on 20 June, 2023",
        "session_2": [
            {"speaker": "Ben", "dia_id": "D2:1", "text": "How was the visit from your sister?"},
            {
                "speaker": "Ana",
                "dia_id": "D2:2",
                "text": "Wonderful, we hiked the Sintra mountains together.",
            },
            {"speaker": "Ben", "dia_id": "D2:3", "text": "I adopted a beagle puppy called Pretzel."},
        ],
    },
    "qa": [
        {"question": "Which city did Ana move to?", "category": 4, "evidence": ["D1:1"]},
        {"question": "What is Ana's job?", "category": 4, "evidence": ["D1:3"]},
        {"question": "Which instrument is Ben learning?", "category": 4, "evidence": ["D1:4"]},
        {"question": "Where did Ana hike with her sister?", "category": 1, "evidence": ["D1:5", "D2:2"]},
        {"question": "What is the name of Ben's dog?", "category": 4, "evidence": ["D2:3"]},
    ],
}


# --- Running ---------------------------------------------------------------------------------------


def extract(platform: Platform, conversation: Conversation, *, batch: int, totals: dict[str, Any]) -> None:
    """The conversation's turns through extraction, ``batch`` at a time; failures counted, the run goes on."""
    from extraction.extract import GivenMessage, memory_extract
    from memoryplatform.errors import ServiceError

    for start in range(0, len(conversation.turns), batch):
        turns = conversation.turns[start : start + batch]
        messages = [GivenMessage("user", turn.text[:20_000], turn.key) for turn in turns]
        try:
            outcome = memory_extract(
                caller=platform.caller,
                user_id=conversation.user_id,
                messages=messages,
                turn_id=f"{conversation.user_id}-{start}",
            )
        except ServiceError as exc:
            totals["failures"] += 1
            totals.setdefault("firstFailure", exc.message[:300])
            continue
        record = outcome.extraction
        totals["calls"] += 1
        totals["cost"] += float(record.cost)
        totals["added"] += record.facts_added
        totals["updated"] += record.facts_updated
        totals["unchanged"] += record.facts_unchanged
        totals["rejected"] += record.facts_rejected


def cited_turns(user_id: str) -> dict[int, set[str]]:
    """Each entry of the user: the turns its current value's provenance cites (its latest event's; an
    earlier value's turns, kept in history, do not count)."""
    from usermemory.models import MemoryEvent

    cited: dict[int, set[str]] = {}
    rows = MemoryEvent.objects.filter(user_id=user_id, provenance__isnull=False, entry_id__isnull=False)
    for entry_id, provenance in rows.order_by("created_at", "id").values_list("entry_id", "provenance"):
        if entry_id is not None and isinstance(provenance, dict):
            cited[entry_id] = {str(m) for m in provenance.get("messageIds") or []}
    return cited


def ask(platform: Platform, conversation: Conversation, hits: dict[str, list[bool]]) -> None:
    """Each question with hybrid search; a hit at k when a top-k fact cites an evidence turn."""
    from usermemory import selectors

    cited = cited_turns(conversation.user_id)
    for question in conversation.questions:
        found = selectors.memory_search(
            caller=platform.caller, user_id=conversation.user_id, query=question.text, limit=max(KS),
            mode="hybrid",
        )  # fmt: skip
        for k in KS:
            hit = any(question.evidence & cited.get(entry.id, set()) for entry in found[:k])
            hits[f"hit@{k}"].append(hit)
            hits[f"hit@{k}:{question.category}"].append(hit)


def report(hits: dict[str, list[bool]], totals: dict[str, Any]) -> dict[str, Any]:
    def mean(values: list[bool]) -> float | None:
        return round(sum(values) / len(values), 3) if values else None

    result: dict[str, Any] = {"questions": len(hits["hit@5"])}
    for k in KS:
        result[f"hit@{k}"] = mean(hits[f"hit@{k}"])
    result["by_category"] = {
        locomo.CATEGORY_NAMES[c]: {f"hit@{k}": mean(hits[f"hit@{k}:{c}"]) for k in KS} for c in CATEGORIES
    }
    return result | {"extraction": {**totals, "cost": round(totals["cost"], 6)}}


def run(conversations: list[Conversation], *, batch: int, db_url: str) -> dict[str, Any]:
    from django.conf import settings

    platform = Platform(db_url, name=DB_NAME)
    started = time.perf_counter()
    totals: dict[str, Any] = {"calls": 0, "failures": 0, "cost": 0.0, "added": 0, "updated": 0,
                              "unchanged": 0, "rejected": 0}  # fmt: skip
    hits: dict[str, list[bool]] = defaultdict(list)
    try:
        for conversation in conversations:
            extract(platform, conversation, batch=batch, totals=totals)
            log(f"{conversation.user_id}: {totals['calls']} calls, {totals['added']} facts added so far")
        extracted = time.perf_counter() - started
        platform.embed()
        for conversation in conversations:
            ask(platform, conversation, hits)
    finally:
        target.drop(platform.target)
    result = report(hits, totals)
    result["model"] = settings.LLM_MODEL
    result["seconds"] = {"extraction": round(extracted, 1), "total": round(time.perf_counter() - started, 1)}
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("path", nargs="?", type=Path, help="LoCoMo's JSON (locomo10.json or a part of it)")
    parser.add_argument("--smoke", action="store_true", help="the built-in sample with the scripted model")
    parser.add_argument("--scripted", action="store_true", help="the scripted model instead of LLM_*")
    parser.add_argument("--conversations", type=int, default=0, help="only the first N (0: all)")
    parser.add_argument("--batch", type=int, default=20, help="turns per extraction call (1-50)")
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    args = parser.parse_args(argv)
    if args.smoke:
        conversations = [locomo.conversation(SMOKE_SAMPLE)]
    elif args.path:
        conversations = locomo.load(args.path)
    else:
        parser.error("give LoCoMo's path, or --smoke")
    if args.conversations:
        conversations = conversations[: args.conversations]
    with contextmanager(_llm_env)(args.smoke or args.scripted):
        result = run(conversations, batch=args.batch, db_url=os.environ.get("DATABASE_URL", ""))
    log(json.dumps(result, indent=2))
    if args.out:
        args.out.write_text(json.dumps(result, indent=2))
    if args.smoke and not (result["extraction"]["calls"] and result["hit@5"]):
        log("smoke FAILED: no extraction call succeeded, or no question found its evidence")
        return 1
    return 0


def _llm_env(scripted: bool) -> Iterator[None]:
    """With ``scripted``, the LLM settings point at :func:`scripted_llm` (before Django reads them)."""
    if not scripted:
        if not os.environ.get("LLM_PROVIDER"):
            raise SystemExit("LLM_PROVIDER is empty: set LLM_* (README), or use --scripted")
        yield
        return
    with scripted_llm() as url:
        os.environ |= {
            "LLM_PROVIDER": "openai",
            "LLM_URL": url,
            "LLM_MODEL": SCRIPTED_MODEL,
            "LLM_PRICES": json.dumps({SCRIPTED_MODEL: [0.15, 0.6]}),  # priced as gpt-4o-mini, for scale
        }
        yield


if __name__ == "__main__":
    sys.exit(main())
