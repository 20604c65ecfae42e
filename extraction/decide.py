"""What extraction does with each proposed fact, decided in code, never by the model.

For a fact, the candidates are the agent's visible current entries of the user (usermemory's own
visibility condition, :func:`usermemory.selectors.visible_q`) with the same key, else with a key of the same
meaning (the embedder's vectors of ``"the user's <key>"``, from the policy's
``semanticContradictionThreshold``, as Dream's contradictions by meaning compare keys (``dream.meaning``),
with the same text of a key: :func:`usermemory.searchtext.key_text`).

- **NOOP** when a candidate holds the same value (ignoring case and surrounding spaces);
- **UPDATE** of a candidate the agent may write (its own, or a global entry) whose scope is within the
  fact's bound: the new value goes on that entry, the old one stays in its history;
- **ADD** otherwise: a new entry under the fact's key, in the fact's scope (an entry another agent wrote is
  never written over: it stays as it is).

An ADD or UPDATE is then written through the upsert, which leaves the stored value as it is when it was
observed after the fact's message (time order): the fact is **SKIPPED** (:mod:`extraction.services`).

A fact's **bound** is the most the messages of its call allow, all of them (the model's sources are its
say-so): a fact never becomes visible to an agent that could not read a message the model was shown
(:class:`Bound`). The stored facts shown to the model are bounded alike (:meth:`Bound.may_show`).
"""

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memoryplatform.embeddings import EmbedderError, get_embedder
from memoryplatform.logsafe import exception_summary
from usermemory.keynames import key_carries_meaning, numbered_apart
from usermemory.models import MemoryEntry, Visibility
from usermemory.searchtext import key_text
from usermemory.selectors import ALL_OF_AGENT, current_q, visible_q

logger = logging.getLogger(__name__)

MAX_CANDIDATES = 500  # the user's most recent visible entries a fact is compared with
MAX_CACHED_KEYS = 20_000  # key vectors kept by the process (keys repeat from one extraction to the next)
_key_vectors: dict[tuple[str, str], list[float]] = {}  # (model, key) -> its unit vector
_RANK: dict[str, int] = {Visibility.SELF: 0, Visibility.GROUP: 1, Visibility.GLOBAL: 2}
ADD, UPDATE, NOOP, REJECTED, SKIPPED = "ADD", "UPDATE", "NOOP", "REJECTED", "SKIPPED"


@dataclass(frozen=True)
class Scope:
    """Who sees an entry: its visibility and, for ``group``, its groups."""

    visibility: str
    group_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class Bound:
    """The broadest scope a fact may get. ``groups`` (with ``most`` = group): the groups allowed; ``None``:
    any of the agent's."""

    most: str
    groups: tuple[str, ...] | None = None

    @classmethod
    def of(cls, scope: Scope) -> "Bound":
        """The bound of what is learned from an entry of ``scope`` (only its readers may read it), or of
        facts written in it: ``group`` without groups is any of the agent's."""
        return cls(
            scope.visibility, (scope.group_ids or None) if scope.visibility == Visibility.GROUP else None
        )

    def allows(self, scope: Scope) -> bool:
        if _RANK[scope.visibility] > _RANK[self.most]:
            return False
        if scope.visibility != Visibility.GROUP or self.most != Visibility.GROUP or self.groups is None:
            return True
        return bool(scope.group_ids) and set(scope.group_ids) <= set(self.groups)

    def may_show(self, scope: Scope) -> bool:
        """Whether an entry of ``scope`` may be shown to the model in a call under this bound: every agent
        that may see a fact of the call (any scope the bound allows) may see the entry too."""
        if self.most == Visibility.SELF or scope.visibility == Visibility.GLOBAL:
            return True
        if self.most != Visibility.GROUP or scope.visibility != Visibility.GROUP or self.groups is None:
            return False
        return set(self.groups) <= set(scope.group_ids)

    def narrowest(self, other: "Bound") -> "Bound":
        """The bound of a fact from a call shown messages under both bounds."""
        if _RANK[other.most] < _RANK[self.most]:
            return other
        if _RANK[self.most] < _RANK[other.most]:
            return self
        if self.groups is None:
            return other
        if other.groups is None:
            return self
        return Bound(self.most, tuple(g for g in self.groups if g in other.groups))


@dataclass(frozen=True)
class Candidate:
    entry_id: int
    key: str
    text: str
    visibility: str
    owner: str | None
    group_ids: tuple[str, ...]
    value: Any
    observed_at: datetime | None = None  # when what its value says was observed

    @property
    def scope(self) -> Scope:
        return Scope(self.visibility, self.group_ids)


@dataclass(frozen=True)
class Decision:
    """What to do with one fact: ``op``, the entry it matched (``target``, for UPDATE and NOOP), and the key
    and scope of the write (ADD and UPDATE)."""

    op: str
    key: str
    scope: Scope | None
    target: Candidate | None = None
    matched_by: str = ""  # "key" or "meaning"


def visible_candidates(*, user_id: str, agent_id: str) -> list[Candidate]:
    """The user's current entries the agent sees (every group of the agent's), most recent first."""
    rows = (
        MemoryEntry.objects.filter(visible_q(user_id=user_id, agent_id=agent_id, group_ids=ALL_OF_AGENT))
        .filter(current_q())
        .order_by("-updated_at", "-id")
        .values_list(
            "id", "key", "value_text", "visibility", "source_agent_id", "group_ids", "value", "observed_at"
        )
    )[:MAX_CANDIDATES]
    return [
        Candidate(entry_id, key, text, visibility, owner, tuple(groups or ()), value, observed)
        for entry_id, key, text, visibility, owner, groups, value, observed in rows
    ]


def _unit(vector: list[float]) -> list[float]:
    norm = sum(x * x for x in vector) ** 0.5 or 1.0
    return [x / norm for x in vector]


class KeyMeaning:
    """The similarity of keys by meaning, from one embedder call for every key of an extraction; without an
    embedder (or when it fails) only equal keys match."""

    def __init__(self, keys: set[str], *, threshold: float) -> None:
        self.threshold = threshold
        self.vectors: dict[str, list[float]] = {}
        embedder = get_embedder()
        if embedder is None or not keys:
            return
        model = embedder.model_id
        if len(_key_vectors) + len(keys) > MAX_CACHED_KEYS:
            _key_vectors.clear()
        keys = {k for k in keys if key_carries_meaning(k)}  # a number or an id means nothing to compare
        missing = sorted(k for k in keys if (model, k) not in _key_vectors)
        try:
            vectors = embedder.embed_passages([key_text(k) for k in missing]) if missing else []
        except EmbedderError as exc:
            logger.warning(
                "Extraction: keys compared by equality only, the embedder failed: %s", exception_summary(exc)
            )
            return
        _key_vectors.update({(model, k): _unit(v) for k, v in zip(missing, vectors, strict=True)})
        self.vectors = {k: _key_vectors[(model, k)] for k in keys}

    def similarity(self, a: str, b: str) -> float:
        """1 for the same key; 0 unless both carry a meaning and are not two items of one list
        (:mod:`usermemory.keynames`: ``memories/1`` and ``memories/2`` are two facts, as Dream reads them);
        else the cosine of their vectors."""
        if a == b:
            return 1.0
        if a not in self.vectors or b not in self.vectors or numbered_apart(a, b):
            return 0.0
        return sum(x * y for x, y in zip(self.vectors[a], self.vectors[b], strict=True))


def _agree(a: str, b: str) -> bool:
    return a.strip().casefold() == b.strip().casefold()


def _writable(candidate: Candidate, *, agent_id: str, bound: Bound) -> bool:
    """The agent may write the entry (its own, or a global one: one per key and user) and its scope is
    within the fact's bound."""
    mine = candidate.owner == agent_id or candidate.visibility == Visibility.GLOBAL
    return mine and bound.allows(candidate.scope)


def decide(
    *,
    key: str,
    value: str,
    scope: Scope,
    bound: Bound,
    agent_id: str,
    candidates: list[Candidate],
    meaning: KeyMeaning,
) -> Decision:
    """The operation for one fact (see the module's text). ``scope``: where an ADD goes (within ``bound``)."""
    same = [c for c in candidates if c.key == key]
    matched_by = "key"
    if not same:
        scored = [(meaning.similarity(key, c.key), c) for c in candidates]
        same = [c for score, c in sorted(scored, key=lambda sc: -sc[0]) if score >= meaning.threshold]
        matched_by = "meaning"
    for candidate in same:
        if _agree(candidate.text, value):
            return Decision(NOOP, candidate.key, None, candidate, matched_by)
    for candidate in same:
        if _writable(candidate, agent_id=agent_id, bound=bound):
            return Decision(UPDATE, candidate.key, candidate.scope, candidate, matched_by)
    return Decision(ADD, key, scope, None, "")
