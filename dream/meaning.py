"""Contradictions by meaning (issue 20): two current entries of one user whose keys differ but mean the same
(``city`` and ``home_town``) and whose values disagree.

Keys are compared by the embedder's vectors of ``"the user's <key>"`` (underscores, dots and slashes as
spaces; each key is embedded once per model and kept in :class:`dream.models.KeyVector`, not in every
cycle): the local model tells ``city``/``home_town`` (0.967) from ``name``/``language`` (0.957) that way,
where bare keys score every pair alike. Two keys mean the same from the policy's
``semanticContradictionThreshold`` (cosine similarity, default 0.96). Values agree when their texts are equal
ignoring case and surrounding spaces.

Only keys that carry a meaning are compared (issue 46, :mod:`usermemory.keynames`): a number, an id or a path
to one (LangGraph's ``1``, ``memories/1``, a uuid, ``m-7f3a``) is neither embedded nor compared, since such
keys are as close to each other as synonyms are though they name unrelated facts; and ``phone_1``/``phone_2``
(the same words, other numbers) are two items, not one meaning. Keys that share a word but not all (``ticket``
and ``open_ticket``, ``first_name`` and ``last_name``) score high by that word alone: they mean the same only
from the threshold plus SHARED_WORD_MARGIN. ``bench.meaning_sets`` measures each rule.

Each entry of a pair records the other in ``meaning_conflicts``; the contradiction pass then flags an
in-scope entry whose list is not empty (:func:`dream.contradictions.dream_detect_contradictions`), and an
agent sees the flag only while a partner it can see disagrees, as for a key's set. With
``confirmContradictionsWithLlm`` the LLM confirms each pair before it counts, within the cycle's cost cap
and its call caps (``maxLlmCallsPerRun``, ``maxLlmCallsPerUser``: :mod:`dream.records`); a pair not asked
is not confirmed. The run records counts, the first pairs and the first few failures.
"""

import logging
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from django.conf import settings
from django.db.models import Q, QuerySet

from activity.budget import AgentBudget, LlmBudgetExhausted
from activity.models import LlmSpend
from dream.records import MAX_RECORDED_FAILURES, LlmCalls, record_failure
from dream.store import key_vectors_read, key_vectors_write
from memoryplatform.embeddings import Embedder, EmbedderError, get_embedder
from memoryplatform.llm import LLM, Completion, LLMError
from memoryplatform.logsafe import exception_summary
from usermemory.conflicts import dismissed_pairs_of
from usermemory.keynames import key_carries_meaning, key_words, numbered_apart
from usermemory.maintenance import meaning_conflicts_record
from usermemory.models import MemoryEntry
from usermemory.searchtext import key_text

logger = logging.getLogger(__name__)

MAX_KEYS_PER_USER = 500  # pairs grow with the square; a user's keys past this are not compared
USERS_PER_CHUNK = 500  # users read at a time: a cycle's memory is bounded by a chunk, not by the table
KEY_VECTORS_KEPT = 50_000  # key vectors kept for the next chunks (about 150 MB at 384 dimensions)
MAX_RECORDED_PAIRS = 100  # a run's details list the first pairs; all are counted
# Keys that share a word (open_ticket/ticket, first_name/last_name) are closer than their meanings: they mean
# the same only from the threshold plus this (bench.meaning_sets, session 18: on the local model it keeps
# 14 of 15 such true pairs and drops 11 of 18 false ones).
SHARED_WORD_MARGIN = 0.01
CONFIRM_SYSTEM = (
    "Two facts stored about one user have different keys. Say whether they describe the same attribute of "
    'the user with values that cannot both be true. Answer with JSON only: {"contradiction": true|false}'
)
CONFIRM_SCHEMA = {
    "type": "object",
    "required": ["contradiction"],
    "properties": {"contradiction": {"type": "boolean"}},
}


def _agree(a: str, b: str) -> bool:
    return a.strip().casefold() == b.strip().casefold()


@dataclass(frozen=True)
class Pair:
    """Two entries of one user whose keys mean the same and whose values disagree, with their texts."""

    user_id: str
    first: int
    second: int
    first_text: str
    second_text: str


@dataclass
class MeaningResult:
    pairs: list[tuple[int, int]] = field(default_factory=list)
    updated: int = 0
    cost: float = 0.0
    rejected: int = 0  # pairs the LLM did not confirm
    not_asked: int = 0  # pairs the LLM was not asked about (a cap): not confirmed
    failure_count: int = 0
    failures: list[str] = field(default_factory=list)  # the first few
    out_of_budget: list[str] = field(default_factory=list)  # agents whose LLM budget refused a confirmation
    skipped: str = ""

    def fail(self, error: str) -> None:
        self.failure_count += 1
        record_failure(self.failures, error)

    def details(self) -> dict[str, Any]:
        return {
            "pairs": [list(p) for p in self.pairs[:MAX_RECORDED_PAIRS]],
            "pairCount": len(self.pairs),
            "entriesUpdated": self.updated,
            "llmCost": self.cost,
            "rejectedByLlm": self.rejected,
            "notAskedByCap": self.not_asked,
            "failureCount": self.failure_count,
            "failures": self.failures[:MAX_RECORDED_FAILURES],
            "stoppedByLlmBudget": self.out_of_budget,
            **({"skipped": self.skipped} if self.skipped else {}),
        }


def find_pairs(
    *,
    current: QuerySet[MemoryEntry],
    scope: Q,
    threshold: float,
    key_rules: bool = True,
    shared_word_margin: float = SHARED_WORD_MARGIN,
) -> list[Pair]:
    """The pairs of the ``current`` entries of the users in ``scope`` whose keys mean
    the same (from ``threshold``) and whose values disagree; at least one side in ``scope``. Empty without
    an embedder; EmbedderError when it fails.

    ``key_rules`` (off only for ``bench.meaning_sets``' before): a key that carries no meaning (a number, an
    id, ``memories/1``: :func:`usermemory.keynames.key_carries_meaning`) is neither embedded nor compared, and
    two keys that differ only in their numbers (``phone_1``, ``phone_2``) never mean the same. Two keys that
    share a word but not all (``open_ticket``, ``ticket``) mean the same from
    ``threshold + shared_word_margin``.

    The users are read USERS_PER_CHUNK at a time, so memory is bounded by a chunk's entries and the key
    vectors kept for the next chunks (at most KEY_VECTORS_KEPT), not by the table."""
    embedder = get_embedder()
    if embedder is None:
        return []
    users = list(current.filter(scope).values_list("user_id", flat=True).distinct().order_by("user_id"))
    vectors: dict[str, np.ndarray] = {}
    pairs: list[Pair] = []
    keys = _Keys(threshold, embedder, key_rules, shared_word_margin)
    for start in range(0, len(users), USERS_PER_CHUNK):
        chunk = users[start : start + USERS_PER_CHUNK]
        pairs.extend(_chunk_pairs(current, scope, chunk, keys, vectors))
        if len(vectors) > KEY_VECTORS_KEPT:
            vectors.clear()
    return pairs


@dataclass(frozen=True)
class _Keys:
    """How keys are compared: the similarity from which two mean the same, the model, the key rules, and
    the margin asked of keys that share a word."""

    threshold: float
    embedder: Embedder
    rules: bool
    shared_word_margin: float

    def compared(self, key: str) -> bool:
        return not self.rules or key_carries_meaning(key)

    def mean_the_same(self, first: str, second: str, similarity: float) -> bool:
        """Whether two keys whose similarity reaches the threshold mean the same."""
        if self.rules and numbered_apart(first, second):
            return False
        first_words, second_words = key_words(first), key_words(second)
        if first_words != second_words and first_words & second_words:
            return similarity >= self.threshold + self.shared_word_margin
        return True


def _fill_vectors(keys: set[str], embedder: Embedder, vectors: dict[str, np.ndarray]) -> None:
    """Put the unit vectors of ``keys`` in ``vectors``: those kept (:mod:`dream.store`), the others embedded
    and kept."""
    missing = sorted(keys - vectors.keys())
    stored = key_vectors_read(model=embedder.model_id, keys=missing)
    vectors.update(stored)
    missing = [key for key in missing if key not in stored]
    step = max(1, settings.EMBEDDINGS_BATCH_SIZE)  # the embedder's tensors stay a batch's size
    for start in range(0, len(missing), step):
        keys_now = missing[start : start + step]
        computed = np.asarray(embedder.embed_passages([key_text(k) for k in keys_now]), dtype=np.float64)
        norms = np.linalg.norm(computed, axis=1, keepdims=True)
        batch = dict(zip(keys_now, computed / np.where(norms == 0, 1.0, norms), strict=True))
        key_vectors_write(model=embedder.model_id, vectors=batch)
        vectors.update(batch)


def _chunk_pairs(
    current: QuerySet[MemoryEntry],
    scope: Q,
    users: list[str],
    keys: _Keys,
    vectors: dict[str, np.ndarray],
) -> list[Pair]:
    """:func:`find_pairs` for these users; ``vectors`` (unit key vectors) is read and filled."""
    in_scope = set(current.filter(scope, user_id__in=users).values_list("id", flat=True))
    rows = current.filter(user_id__in=users).values_list("id", "user_id", "key", "value_text").order_by("id")
    by_user: dict[str, list[tuple[int, str, str]]] = defaultdict(list)
    for entry_id, user_id, key, text in rows:
        if keys.compared(key):
            by_user[user_id].append((entry_id, key, text))
    _fill_vectors({key for entries in by_user.values() for _, key, _ in entries}, keys.embedder, vectors)
    pairs = []
    for user_id, entries in by_user.items():
        user_keys = sorted({key for _, key, _ in entries})[:MAX_KEYS_PER_USER]
        close = _close_keys(user_keys, vectors, keys.threshold)
        same = {(a, b) for (a, b), similarity in close.items() if keys.mean_the_same(a, b, similarity)}
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
                        Pair(
                            user_id,
                            first,
                            second,
                            f"{first_key}: {first_text}",
                            f"{second_key}: {second_text}",
                        )
                    )
    return pairs


def _close_keys(
    keys: list[str], vectors: dict[str, np.ndarray], threshold: float
) -> dict[tuple[str, str], float]:
    """The pairs of these (sorted) keys whose vectors' cosine similarity reaches ``threshold``, with it."""
    if len(keys) < 2:
        return {}
    similarity = np.stack([vectors[k] for k in keys])
    similarity = similarity @ similarity.T
    close = np.argwhere(np.triu(similarity >= threshold, k=1))
    return {(keys[i], keys[j]): float(similarity[i, j]) for i, j in close}


def without_dismissed(pairs: list[Pair]) -> list[Pair]:
    """The pairs staff did not say are no conflict (:class:`usermemory.models.ConflictDismissal`: the same
    keys and value texts, in either order)."""
    dismissed = dismissed_pairs_of(user_ids={p.user_id for p in pairs}) if pairs else set()
    if not dismissed:
        return pairs
    ids = {i for p in pairs for i in (p.first, p.second)}
    sides = {
        i: (k, t) for i, k, t in MemoryEntry.objects.filter(id__in=ids).values_list("id", "key", "value_text")
    }
    kept = []
    for pair in pairs:
        first, second = sorted([sides[pair.first], sides[pair.second]])
        if (pair.user_id, *first, *second) not in dismissed:
            kept.append(pair)
    return kept


@dataclass(frozen=True)
class ConfirmLimits:
    """What the LLM's confirmation may use: the dollars left (``budget``), the cycle's calls (``calls``) and
    its caps (the lowest of the confirming policies'); ``payers``: the confirming agents, whose LLM budgets
    pay the calls."""

    budget: float
    calls: LlmCalls
    per_run: int
    per_user: int
    payers: tuple[str, ...]


def _payers(pairs: list[Pair], payers: tuple[str, ...]) -> list[str]:
    """The agent whose LLM budget pays each pair's call: the owner of its first entry, else of its second,
    when that owner confirms with the LLM; else the first of ``payers`` (a pair of another agent's entries
    or of global ones, confirmed for a cross-agent policy)."""
    ids = {i for p in pairs for i in (p.first, p.second)}
    owners = dict(MemoryEntry.objects.filter(id__in=ids).values_list("id", "source_agent_id")) if ids else {}
    chosen = []
    for pair in pairs:
        mine = [o for o in (owners.get(pair.first), owners.get(pair.second)) if o in payers]
        chosen.append(mine[0] if mine else payers[0])
    return chosen


def _ask(*, prompt: str, llm: LLM, payer: str) -> Completion:
    """One confirmation, paid by ``payer``'s LLM budget."""
    spending = AgentBudget(agent_id=payer, use=LlmSpend.Use.CONFIRMATION)
    return llm.complete_json(system=CONFIRM_SYSTEM, prompt=prompt, schema=CONFIRM_SCHEMA, spending=spending)


def confirm(
    *, pairs: list[Pair], llm: LLM, limits: ConfirmLimits, result: MeaningResult
) -> list[tuple[int, int]]:
    """The pairs the LLM confirms, one call each, while the next call's estimated prompt cost stays within
    the budget and the call caps allow it (a user at its cap: that user's other pairs are not asked; the
    cycle at its cap: no more pairs are), each paid by an agent's LLM budget (:func:`_payers`; an agent
    whose budget refused a call pays no more this cycle: its pairs are not asked). A pair not asked, or
    whose call failed, is not confirmed."""
    confirmed = []
    payers = _payers(pairs, limits.payers)
    for index, pair in enumerate(pairs):
        prompt = f"Fact A: {pair.first_text}\nFact B: {pair.second_text}"
        if result.cost + llm.estimate_cost(system=CONFIRM_SYSTEM, prompt=prompt) > limits.budget:
            result.fail("stopped at maxCostPerRun")
            result.not_asked += len(pairs) - index
            break
        if limits.calls.run_cap_reached(per_run=limits.per_run):
            limits.calls.stopped.append("confirmations")
            result.not_asked += len(pairs) - index
            break
        payer = payers[index]
        if payer in result.out_of_budget or not limits.calls.take(
            user_id=pair.user_id, per_run=limits.per_run, per_user=limits.per_user
        ):
            result.not_asked += 1
            continue
        try:
            done = _ask(prompt=prompt, llm=llm, payer=payer)
        except LlmBudgetExhausted as exc:
            limits.calls.give_back(user_id=pair.user_id, entries=())
            result.out_of_budget.append(payer)
            result.not_asked += 1
            logger.info("Dream: a confirmation by meaning is not asked: %s", exc.message)
            continue
        except LLMError as exc:
            result.cost += exc.cost
            result.fail(str(exc))
            continue
        result.cost += done.cost
        if done.data["contradiction"]:
            confirmed.append((pair.first, pair.second))
        else:
            result.rejected += 1
    return confirmed


def dream_meaning_conflicts(
    *,
    current: QuerySet[MemoryEntry],
    scope: Q,
    threshold: float,
    llm: LLM | None,
    limits: ConfirmLimits | None,
    dry_run: bool,
) -> MeaningResult:
    """Find the pairs among the ``current`` entries (a dry run: minus those it would prune) with
    :func:`find_pairs`, have the LLM confirm them when ``llm`` is given (within ``limits``), and record each
    entry's partners in ``meaning_conflicts`` (emptied where a pair is gone), for every current entry of the
    users in scope (:func:`usermemory.maintenance.meaning_conflicts_record`). A dry run records nothing but
    the key vectors it computed (:mod:`dream.store`: a cache of the model's vectors, no finding)."""
    result = MeaningResult()
    if get_embedder() is None:
        result.skipped = "no embedder (EMBEDDINGS_PROVIDER=none)"
        return result
    try:
        found = without_dismissed(find_pairs(current=current, scope=scope, threshold=threshold))
    except EmbedderError as exc:
        result.skipped = f"the embedder failed: {exc}"
        logger.warning("Dream: contradictions by meaning skipped: %s", exception_summary(exc))
        return result
    if llm is not None and limits is not None:
        result.pairs = confirm(pairs=found, llm=llm, limits=limits, result=result)
    else:
        result.pairs = [(p.first, p.second) for p in found]
    if dry_run:
        return result
    partners: dict[int, set[int]] = defaultdict(set)
    for first, second in result.pairs:
        partners[first].add(second)
        partners[second].add(first)
    result.updated = meaning_conflicts_record(scope=scope, partners=partners)
    return result
