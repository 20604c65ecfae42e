"""Contradictions by meaning (issue 20): two current entries of one user whose keys differ but mean the same
(``city`` and ``home_town``) and whose values disagree.

Keys are compared by the embedder's vectors of ``"the user's <key>"`` (underscores, dots and slashes as
spaces): the local model tells ``city``/``home_town`` (0.967) from ``name``/``language`` (0.957) that way,
where bare keys score every pair alike. Two keys mean the same from the policy's
``semanticContradictionThreshold`` (cosine similarity, default 0.96). Values agree when their texts are equal
ignoring case and surrounding spaces.

Each entry of a pair records the other in ``meaning_conflicts``; the contradiction pass then flags an
in-scope entry whose list is not empty (:func:`dream.contradictions.dream_detect_contradictions`), and an
agent sees the flag only while a partner it can see disagrees, as for a key's set. With
``confirmContradictionsWithLlm`` the LLM confirms each pair before it counts, within the cycle's cost cap.
"""

import logging
import math
import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Q, QuerySet

from memoryplatform.embeddings import EmbedderError, get_embedder
from memoryplatform.llm import LLM, LLMError
from usermemory.maintenance import meaning_conflicts_record
from usermemory.models import MemoryEntry

logger = logging.getLogger(__name__)

MAX_KEYS_PER_USER = 500  # pairs grow with the square; a user's keys past this are not compared
_SEPARATORS = re.compile(r"[_./:-]+")
CONFIRM_SYSTEM = (
    "Two facts stored about one user have different keys. Say whether they describe the same attribute of "
    'the user with values that cannot both be true. Answer with JSON only: {"contradiction": true|false}'
)
CONFIRM_SCHEMA = {
    "type": "object",
    "required": ["contradiction"],
    "properties": {"contradiction": {"type": "boolean"}},
}


def key_text(key: str) -> str:
    return "the user's " + _SEPARATORS.sub(" ", key).strip()


def _unit(vector: list[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return [x / norm for x in vector]


def _agree(a: str, b: str) -> bool:
    return a.strip().casefold() == b.strip().casefold()


@dataclass
class MeaningResult:
    pairs: list[tuple[int, int]] = field(default_factory=list)
    updated: int = 0
    cost: float = 0.0
    rejected: int = 0  # pairs the LLM did not confirm
    failures: list[str] = field(default_factory=list)
    skipped: str = ""

    def details(self) -> dict[str, Any]:
        return {
            "pairs": [list(p) for p in self.pairs],
            "entriesUpdated": self.updated,
            "llmCost": self.cost,
            "rejectedByLlm": self.rejected,
            "failures": self.failures,
            **({"skipped": self.skipped} if self.skipped else {}),
        }


def find_pairs(
    *, current: QuerySet[MemoryEntry], scope: Q, threshold: float
) -> list[tuple[int, int, str, str]]:
    """(entry id, entry id, text, text) of the ``current`` entries of the users in ``scope`` whose keys mean
    the same (from ``threshold``) and whose values disagree; at least one side in ``scope``. Empty without
    an embedder; EmbedderError when it fails."""
    embedder = get_embedder()
    if embedder is None:
        return []
    users = current.filter(scope).values("user_id").distinct()
    in_scope = set(current.filter(scope).values_list("id", flat=True))
    rows = current.filter(user_id__in=users).values_list("id", "user_id", "key", "value_text").order_by("id")
    by_user: dict[str, list[tuple[int, str, str]]] = defaultdict(list)
    for entry_id, user_id, key, text in rows:
        by_user[user_id].append((entry_id, key, text))
    keys = sorted({key for entries in by_user.values() for _, key, _ in entries})
    if not keys:
        return []
    vectors = dict(
        zip(keys, (_unit(v) for v in embedder.embed_passages([key_text(k) for k in keys])), strict=True)
    )
    pairs = []
    for entries in by_user.values():
        user_keys = sorted({key for _, key, _ in entries})[:MAX_KEYS_PER_USER]
        same = set()
        for i, a in enumerate(user_keys):
            for b in user_keys[i + 1 :]:
                if sum(x * y for x, y in zip(vectors[a], vectors[b], strict=True)) >= threshold:
                    same.add((a, b))
        if not same:
            continue
        for first_index, (first, first_key, first_text) in enumerate(entries):
            for second, second_key, second_text in entries[first_index + 1 :]:
                pair = (min(first_key, second_key), max(first_key, second_key))
                if (
                    pair in same
                    and not _agree(first_text, second_text)
                    and (first in in_scope or second in in_scope)
                ):
                    pairs.append(
                        (first, second, f"{first_key}: {first_text}", f"{second_key}: {second_text}")
                    )
    return pairs


def confirm(
    *, pairs: list[tuple[int, int, str, str]], llm: LLM, budget: float, result: MeaningResult
) -> list[tuple[int, int]]:
    """The pairs the LLM confirms, one call each, while the next call's estimated prompt cost stays within
    ``budget``; a pair not asked (the budget) or whose call failed is not confirmed."""
    confirmed = []
    for first, second, first_text, second_text in pairs:
        prompt = f"Fact A: {first_text}\nFact B: {second_text}"
        if result.cost + llm.estimate_cost(system=CONFIRM_SYSTEM, prompt=prompt) > budget:
            result.failures.append("stopped at maxCostPerRun")
            break
        try:
            done = llm.complete_json(system=CONFIRM_SYSTEM, prompt=prompt, schema=CONFIRM_SCHEMA)
        except LLMError as exc:
            result.cost += exc.cost
            result.failures.append(str(exc))
            continue
        result.cost += done.cost
        if done.data["contradiction"]:
            confirmed.append((first, second))
        else:
            result.rejected += 1
    return confirmed


def dream_meaning_conflicts(
    *,
    current: QuerySet[MemoryEntry],
    scope: Q,
    threshold: float,
    llm: LLM | None,
    budget: float,
    dry_run: bool,
) -> MeaningResult:
    """Find the pairs among the ``current`` entries (a dry run: minus those it would prune) with
    :func:`find_pairs`, have the LLM confirm them when ``llm`` is given, and record each
    entry's partners in ``meaning_conflicts`` (emptied where a pair is gone), for every current entry of the
    users in scope (:func:`usermemory.maintenance.meaning_conflicts_record`). A dry run records nothing."""
    result = MeaningResult()
    if get_embedder() is None:
        result.skipped = "no embedder (EMBEDDINGS_PROVIDER=none)"
        return result
    try:
        found = find_pairs(current=current, scope=scope, threshold=threshold)
    except EmbedderError as exc:
        result.skipped = f"the embedder failed: {exc}"
        logger.warning("Dream: contradictions by meaning skipped: %s", exc)
        return result
    result.pairs = (
        confirm(pairs=found, llm=llm, budget=budget, result=result) if llm else [p[:2] for p in found]
    )
    if dry_run:
        return result
    partners: dict[int, set[int]] = defaultdict(set)
    for first, second in result.pairs:
        partners[first].add(second)
        partners[second].add(first)
    result.updated = meaning_conflicts_record(scope=scope, partners=partners)
    return result
