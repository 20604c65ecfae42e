"""How ranked reads rank: the first stage (:mod:`usermemory.sql.search`, scored by
:mod:`memoryplatform.relevance`) and the second (:mod:`memoryplatform.rerank`), for the per-user search and
the recall by relevance alike.

A score is the probability that the entry is relevant to the query, in [0, 1], the same from one query to the
next; ``minScore`` leaves out what scores under it. A score depends only on the query and the entries the
caller may read: every statistic of the first stage is computed over those rows in the same statement, and
the second stage reads only the query and the candidate."""

import logging
import re
from typing import NamedTuple
from weakref import WeakKeyDictionary

from django.conf import settings
from prometheus_client import Counter

from memoryplatform.embeddings import Embedder, EmbedderError, get_embedder
from memoryplatform.errors import BadRequest
from memoryplatform.logsafe import exception_summary
from memoryplatform.ranked import Ranking
from memoryplatform.relevance import HUB_QUESTION, calibration_for, discounted_query
from memoryplatform.rerank import RerankerError, get_reranker
from memoryplatform.text import check_query
from usermemory.searchtext import value_as_text
from usermemory.sql.search import ScoredEntry

logger = logging.getLogger(__name__)

SEARCH_MODES = ("keyword", "semantic", "hybrid")
RANKED_MODES = ("semantic", "hybrid")
# The one message of every door that ranks by relevance and is asked for another mode.
RANKED_MODES_MESSAGE = (
    "mode must be semantic or hybrid (the default) to rank by relevance; keyword (a literal match, "
    "newest first) is a mode of the search only."
)
# The first stage's depth: the first FUSION_CANDIDATES of each list (semantic, full text) are candidates.
FUSION_CANDIDATES = 100

search_fallbacks = Counter(
    "memory_search_fallbacks",
    "Semantic or hybrid searches answered by full text alone: the embedder was down or not configured.",
    ["mode"],
)
rerank_fallbacks = Counter(
    "memory_rerank_fallbacks",
    "Ranked reads answered by the first stage alone: the reranker failed.",
)


class RankedSearch(NamedTuple):
    """Entries best first with their scores; ``fallback`` names what answered instead when a stage was down:
    "fulltext" (the embedder could not embed the query), "unreranked" (the reranker failed), or both."""

    entries: list[ScoredEntry]
    fallback: str | None


def check_min_score(min_score: float | None) -> float:
    """``minScore`` as a ranking takes it: 0 when absent; a BadRequest outside [0, 1]."""
    if min_score is None:
        return 0.0
    if not 0.0 <= min_score <= 1.0:
        raise BadRequest("minScore must be between 0 and 1: the probability that a result is relevant.")
    return float(min_score)


def _query_vector(query: str) -> tuple[str, str] | None:
    """The query's vector (a pgvector literal), less its model's ``hub_discount`` of the generic question's
    (:func:`memoryplatform.relevance.discounted_query`), and the embedder's model id; ``None`` when there is
    no embedder or it failed (logged)."""
    embedder = get_embedder()
    if embedder is None:
        return None
    try:
        vector = embedder.embed_query(query)
        discount = calibration_for(embedder.model_id).hub_discount
        if discount:
            vector = discounted_query(vector, _hub_vector(embedder), discount)
    except EmbedderError as exc:  # its text may echo the query: the log names the error's type only
        logger.warning(
            "search: the embedder could not embed the query (%s); answering by full text",
            exception_summary(exc),
        )
        return None
    return "[" + ",".join(repr(float(x)) for x in vector) + "]", embedder.model_id


# The vector of HUB_QUESTION by each embedder, held as long as the embedder (built once a process:
# memoryplatform.embeddings.get_embedder), so that a query costs no second embedding.
_hub_vectors: "WeakKeyDictionary[Embedder, list[float]]" = WeakKeyDictionary()


def _hub_vector(embedder: Embedder) -> list[float]:
    """The vector of :data:`~memoryplatform.relevance.HUB_QUESTION` by ``embedder``, embedded on its first
    query; a failure (EmbedderError) is not kept: the next query tries again."""
    hub = _hub_vectors.get(embedder)
    if hub is None:
        hub = _hub_vectors[embedder] = embedder.embed_query(HUB_QUESTION)
    return hub


# Words of a user id that name no one: ``user-42``, ``cust_0193``, ``u-4821``, ``test-ana``.
_NOT_A_NAME = frozenset(
    {"user", "users", "usr", "cust", "customer", "client", "member", "account", "acct", "id", "test"}
)
_THE_USER = frozenset({"user", "users", "user's", "users'"})
_WORD = re.compile(r"[^\W\d_]+(?:'s)?", re.UNICODE)


def user_names(user_id: str | None) -> frozenset[str]:
    """The words that name the user in a query about them: the words of letters of their ``userId`` (``ana``
    of ``ana`` or ``ana.silva``; none of ``u-4821``), casefolded, but for the generic ones."""
    if not user_id:
        return frozenset()
    words = (w.casefold() for w in re.findall(r"[^\W\d_]+", user_id))
    return frozenset(w for w in words if len(w) >= 2 and w not in _NOT_A_NAME)


def about_the_user(query: str, names: frozenset[str]) -> tuple[str, str]:
    """What the two sides of a ranked read take of ``query`` about one user: the text to embed, with the
    user's own name written "the user" (``does ana have a car`` reads ``does the user have a car``), and the
    words for full text, without the name nor "user". In a store of one user's facts the name is in the
    question and in the values alike: it says nothing of which fact answers, yet a value that names the user
    would outrank one that answers (issue 45)."""
    if not names:
        return query, _without(query, _THE_USER)

    def named(match: re.Match[str]) -> str:
        word = match.group(0)
        bare = word[:-2] if word.endswith("'s") else word
        if bare.casefold() not in names:
            return word
        return "the user's" if word.endswith("'s") else "the user"

    return _WORD.sub(named, query), _without(query, names | _THE_USER)


def _without(query: str, words: frozenset[str]) -> str:
    """``query`` without these words (casefolded, as they stand or with ``'s``)."""

    def bare(word: str) -> str:
        return word.casefold().strip(".,;:!?\"'()").removesuffix("'s")

    return " ".join(word for word in query.split() if bare(word) not in words)


def search_ranking(
    *,
    query: str,
    mode: str,
    window: int,
    min_score: float | None = None,
    user_id: str | None = None,
) -> tuple[Ranking, str | None]:
    """The first stage of a ``semantic`` or ``hybrid`` read of ``window`` results (limit + offset), and its
    fallback: "fulltext" when the embedder could not embed the query (counted in
    ``memory_search_fallbacks_total``), in which case both modes rank by full text alone. ``user_id``: the one
    user whose rows are ranked, if there is one: their name lifts nothing (:func:`about_the_user`)."""
    if mode not in RANKED_MODES:
        raise BadRequest(RANKED_MODES_MESSAGE)
    if not query:
        raise BadRequest("q is required: the text to search for.")
    check_query(query)
    meaning, words = about_the_user(query, user_names(user_id))
    embedded = _query_vector(meaning)
    fallback = None
    if embedded is None:
        fallback = "fulltext"
        search_fallbacks.labels(mode=mode).inc()
    model = embedded[1] if embedded else ""
    ranking = Ranking(
        query=words,
        vector=embedded[0] if embedded else None,
        model=model,
        fulltext=mode == "hybrid" or embedded is None,
        config=settings.SEARCH_LANGUAGE,
        depth=max(FUSION_CANDIDATES, window) if mode == "hybrid" else window,
        calibration=calibration_for(model),
        min_score=check_min_score(min_score),
    )
    return ranking, fallback


def second_stage_window(window: int) -> int | None:
    """How many first-stage candidates a read of ``window`` results fetches when a reranker is configured
    (``None``: no reranker, the first stage answers, its threshold applied in SQL)."""
    if get_reranker() is None:
        return None
    return max(window, settings.RERANK_DEPTH)


def entry_document(scored: ScoredEntry) -> str:
    """What the reranker reads of an entry: its key and its value's text."""
    return f"{scored.entry.key}: {value_as_text(scored.entry.value)}"


def rerank(
    *, query: str, candidates: list[ScoredEntry], min_score: float, agent_id: str | None = None
) -> tuple[list[ScoredEntry], bool]:
    """The first ``RERANK_DEPTH`` candidates rescored by the reranker and sorted by it, then the rest in the
    first stage's order, each kept if it scores at least ``min_score``; and whether the reranker failed (the
    first stage's order and scores then answer, counted in ``memory_rerank_fallbacks_total``). ``agent_id``:
    the agent reading, whose LLM budget pays an ``llm`` reranker's call."""
    reranker = get_reranker()
    head, tail = candidates[: settings.RERANK_DEPTH], candidates[settings.RERANK_DEPTH :]
    failed = False
    if reranker is not None and head:
        try:
            scores = reranker.scores(query, [entry_document(scored) for scored in head], agent_id=agent_id)
        except RerankerError as exc:
            logger.warning(
                "search: the reranker failed (%s); answering with the first stage", exception_summary(exc)
            )
            rerank_fallbacks.inc()
            failed = True
        else:
            head = [s._replace(score=p) for s, p in zip(head, scores, strict=True)]
            head.sort(key=lambda s: (-s.score, s.entry.id))
    return [s for s in head + tail if s.score >= min_score], failed


def fallback_of(*, first: str | None, unreranked: bool) -> str | None:
    """The fallback a read reports (:class:`RankedSearch`)."""
    parts = [part for part in (first, "unreranked" if unreranked else None) if part]
    return ",".join(parts) or None
