"""Recall where most users are: a handful of facts a user, asked in other words (issue 45).

    env -u DATABASE_URL .venv/bin/python -m bench.small_stores ../shared/data/user-facts/dev.json \\
        [--min-score 0.3] [--out /tmp/small.json]

A data file holds users with a few facts each, every fact with questions worded apart from it, and questions
about things the user never said (off-topic). Two shapes are read: ``users: {id: [facts]}`` with one
``offTopic`` list asked of every user (the user-facts sets), and ``users: {id: {name, facts, offTopic}}``
(``bench/calibration/small_stores.json``). Each user's facts are written through the service, by one agent,
in a fresh database (``bench_small`` in the embedded server, or ``--db-url``), and embedded. Then, through
REST (Django's test client: the whole request path in process, with the agent's key):

- ``GET .../{userId}/search?q=...&mode=hybrid&minScore=0``: hit@1 and hit@3 (the fact asked about among the
  first 1 or 3);
- ``GET .../{userId}/visible?q=...`` as an agent's context gets it by default (the best ``recallTopK``, no
  cut; or at ``--min-score``): the fact kept (what fills ``/context``, ``searchMemory`` and MCP), and how many
  results came with it;
- the same for each off-topic question: the share that returns nothing, and the mean score of its top row
  beside the mean score of the top row of the questions with an answer.

Each figure overall and per key style: descriptive (``home_city``), numbered (``1``, ``memories/1``) and
opaque (``m-7f3a``, ``k-09``, a uuid), told from the user's keys. Nothing here is fitted: the scores are the
platform's, as configured.
"""

import argparse
import json
import os
import re
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.recall_quality import AGENT, Platform

DB_NAME = "bench_small"
BASE = "/usermemorystore/memories"


def log(message: str) -> None:
    print(f"[small {time.strftime('%H:%M:%S')}] {message}", flush=True)


@dataclass
class User:
    user_id: str
    facts: list[tuple[str, str]]
    questions: list[tuple[str, str]]  # (question, the key that answers it)
    off_topic: list[str]

    @property
    def style(self) -> str:
        keys = [key for key, _ in self.facts]
        if all(re.fullmatch(r"(memories/)?\d+", key) for key in keys):
            return "numbered"
        if all(re.search(r"\d", key) for key in keys):
            return "opaque"
        return "descriptive"


def load(path: Path) -> list[User]:
    data = json.loads(path.read_text())
    users = []
    for user_id, given in data["users"].items():
        facts = given if isinstance(given, list) else given["facts"]
        off_topic = data.get("offTopic", []) if isinstance(given, list) else given["offTopic"]
        users.append(
            User(
                user_id=user_id,
                facts=[(f["key"], f["value"]) for f in facts],
                questions=[(q, f["key"]) for f in facts for q in f["questions"]],
                off_topic=list(off_topic),
            )
        )
    return users


@dataclass
class Tally:
    asked: int = 0
    hit1: int = 0
    hit3: int = 0
    kept: int = 0
    returned: int = 0
    off_asked: int = 0
    off_empty: int = 0
    fact_scores: list[float] = field(default_factory=list)  # each question's fact's score (0: not found)
    top_scores: list[float] = field(default_factory=list)  # each question's top row's score
    off_scores: list[float] = field(default_factory=list)  # each off-topic question's best score

    def row(self) -> dict[str, float]:
        return {
            "questions": self.asked,
            "hit@1": round(self.hit1 / max(self.asked, 1), 3),
            "hit@3": round(self.hit3 / max(self.asked, 1), 3),
            "kept at the default": round(self.kept / max(self.asked, 1), 3),
            "results a question": round(self.returned / max(self.asked, 1), 2),
            "off-topic": self.off_asked,
            "off-topic empty": round(self.off_empty / max(self.off_asked, 1), 3),
            "top-row score, answerable (mean)": _mean(self.top_scores),
            "top-row score, off-topic (mean)": _mean(self.off_scores),
        }

    def at(self, threshold: float) -> tuple[float, float]:
        """What a threshold would keep, from the scores with none: (facts kept, off-topic empty)."""
        kept = sum(score >= threshold for score in self.fact_scores) / max(len(self.fact_scores), 1)
        empty = sum(score < threshold for score in self.off_scores) / max(len(self.off_scores), 1)
        return round(kept, 3), round(empty, 3)


def _mean(values: list[float]) -> float:
    return round(sum(values) / max(len(values), 1), 3)


def write(platform: Platform, users: list[User]) -> None:
    from usermemory import services
    from usermemory.services import MemoryWrite, memory_upsert_batch

    services.policy_update(agent_id=AGENT, max_recall_entries=20)
    for user in users:
        writes = [
            MemoryWrite(user_id=user.user_id, key=k, value=v, source_agent_id=AGENT) for k, v in user.facts
        ]
        memory_upsert_batch(caller=platform.caller, writes=writes, turn_id=f"small-{user.user_id}")
    platform.embed()


def ask(
    platform: Platform,
    users: list[User],
    min_score: float | None,
    holder: dict[tuple[str, str], str] | None = None,
) -> dict[str, Tally]:
    """``holder``: the key that now holds a fact, by (user, the fact's key) (a Dream summary that superseded
    it, :mod:`bench.dream_recall`); a fact not in it is held by its own key."""
    from django.test import Client

    client = Client(HTTP_AUTHORIZATION=f"Bearer {platform.raw_key}", SERVER_NAME="127.0.0.1")

    def get(path: str, **params: Any) -> list[dict[str, Any]]:
        response = client.get(path, params)
        if response.status_code != 200:
            raise SystemExit(f"{path} {params}: {response.status_code} {response.content[:300]!r}")
        return response.json()

    visible_params = {} if min_score is None else {"minScore": min_score}
    tallies: dict[str, Tally] = defaultdict(Tally)
    for user in users:
        for question, asked_key in user.questions:
            key = (holder or {}).get((user.user_id, asked_key), asked_key)
            found = get(f"{BASE}/{user.user_id}/search", q=question, mode="hybrid", minScore=0)
            ranked = [e["key"] for e in found]
            visible = get(f"{BASE}/{user.user_id}/visible", q=question, **visible_params)
            score = next((e["score"] for e in found if e["key"] == key), 0.0)
            for tally in (tallies["all"], tallies[user.style]):
                tally.asked += 1
                tally.fact_scores.append(score)
                tally.top_scores.append(found[0]["score"] if found else 0.0)
                tally.hit1 += ranked[:1] == [key]
                tally.hit3 += key in ranked[:3]
                tally.kept += key in [e["key"] for e in visible]
                tally.returned += len(visible)
        for question in user.off_topic:
            visible = get(f"{BASE}/{user.user_id}/visible", q=question, **visible_params)
            found = get(f"{BASE}/{user.user_id}/search", q=question, mode="hybrid", minScore=0, limit=1)
            for tally in (tallies["all"], tallies[user.style]):
                tally.off_asked += 1
                tally.off_scores.append(found[0]["score"] if found else 0.0)
                tally.off_empty += not visible
    return tallies


def report(tallies: dict[str, Tally], threshold: str) -> str:
    styles = [s for s in ("all", "descriptive", "numbered", "opaque") if s in tallies]
    rows = {style: tallies[style].row() for style in styles}
    names = list(rows["all"])
    lines = [f"/visible?q=: {threshold}", "", "| | " + " | ".join(styles) + " |"]
    lines.append("|---|" + "---|" * len(styles))
    for name in names:
        lines.append(f"| {name} | " + " | ".join(str(rows[style][name]) for style in styles) + " |")
    lines += [
        "",
        "what other thresholds would keep (facts kept, off-topic empty), from the scores of a search:",
    ]
    for t in (0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5):
        lines.append(f"- {t}: " + ", ".join(f"{style} {tallies[style].at(t)}" for style in styles))
    return "\n".join(lines)


def stability(platform: Platform, users: list[User], sizes: list[int]) -> str:
    """Each user's first fact, asked by each of its questions, in stores of each size: the fact, then the
    other users' facts (their keys suffixed, cycled) up to the size. The fact's score in each, its spread, and
    whether the default recall by relevance kept it (``/visible?q=``)."""
    from django.test import Client

    from usermemory import services
    from usermemory.services import MemoryWrite, memory_upsert_batch

    services.policy_update(agent_id=AGENT, max_entries_per_user=max(sizes) + 10)
    client = Client(HTTP_AUTHORIZATION=f"Bearer {platform.raw_key}", SERVER_NAME="127.0.0.1")
    others = [(f"{k}_{u.user_id}", v) for u in users for k, v in u.facts]
    rows, spreads = [], []
    for user in users:
        key, value = user.facts[0]
        asked = [q for q, k in user.questions if k == key]
        scores: dict[str, list[float]] = {q: [] for q in asked}
        kept: dict[str, list[bool]] = {q: [] for q in asked}
        for size in sizes:
            store = f"{user.user_id}.{size}"
            filler = [o for o in others if not o[0].endswith(f"_{user.user_id}")]
            facts = [(key, value)] + [(f"{k}.{n}", v) for n, (k, v) in enumerate((filler * size)[: size - 1])]
            writes = [MemoryWrite(user_id=store, key=k, value=v, source_agent_id=AGENT) for k, v in facts]
            for start in range(0, len(writes), 100):
                memory_upsert_batch(
                    caller=platform.caller, writes=writes[start : start + 100], turn_id=f"{store}-{start}"
                )
        platform.embed()
        for size in sizes:
            store = f"{user.user_id}.{size}"
            for q in asked:
                params = {"q": q, "mode": "hybrid", "minScore": "0", "limit": "1000"}
                found = client.get(f"{BASE}/{store}/search", params).json()
                scores[q].append(next((e["score"] for e in found if e["key"] == key), 0.0))
                visible = client.get(f"{BASE}/{store}/visible", {"q": q}).json()
                kept[q].append(key in [e["key"] for e in visible])
        for q in asked:
            spread = max(scores[q]) - min(scores[q])
            spreads.append(spread)
            cells = " | ".join(
                f"{s:.3f}{'' if k else ' (dropped)'}" for s, k in zip(scores[q], kept[q], strict=True)
            )
            rows.append(f"| {user.user_id} | {q} | {cells} | {spread:.3f} |")
    head = "| user | question | " + " | ".join(f"{n} entries" for n in sizes) + " | spread |"
    rule = "|---|---|" + "---|" * len(sizes) + "---|"
    within = sum(s <= 0.1 for s in spreads)
    summary = f"\nlargest spread {max(spreads):.3f}; at most 0.1 for {within} of {len(spreads)}"
    return "\n".join([head, rule, *rows]) + summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("data", type=Path, nargs="+")
    parser.add_argument(
        "--db-url", default="", help="a PostgreSQL server (default: DATABASE_URL, or embedded)"
    )
    parser.add_argument(
        "--min-score", type=float, default=None, help="a minScore for /visible (default: none)"
    )
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument(
        "--store-sizes",
        default="",
        help="also each user's first fact in stores of these sizes, e.g. 1,8,100,5000 (its score and whether "
        "the default keeps it)",
    )
    args = parser.parse_args(argv)
    users = [user for path in args.data for user in load(path)]
    platform = Platform(args.db_url or os.environ.get("DATABASE_URL", ""), name=DB_NAME)
    log(f"{len(users)} users, {sum(len(u.facts) for u in users)} facts; writing and embedding")
    write(platform, users)
    tallies = ask(platform, users, args.min_score)
    default = "the default (the best recallTopK, no cut)"
    threshold = default if args.min_score is None else f"minScore {args.min_score}"
    print(report(tallies, threshold))
    if args.store_sizes:
        print(stability(platform, users, [int(n) for n in args.store_sizes.split(",")]))
    if args.out:
        args.out.write_text(json.dumps({style: t.row() for style, t in tallies.items()}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
