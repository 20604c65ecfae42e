"""A bridge until main's ``usermemory/ranking.py`` (issue 27, the lead's part) is merged: at that merge, take
main's side of this file and of ``memoryplatform/relevance.py`` whole. It gives conversation search the same
names main's module gives: the search modes, the first stage's ranking with the calibrated score
(:mod:`memoryplatform.relevance`), ``minScore``'s check and the recall's default threshold, over this
branch's query embedding and fallback counter (:mod:`usermemory.selectors`)."""

from typing import NamedTuple

from django.conf import settings

from memoryplatform.errors import BadRequest
from memoryplatform.relevance import Calibration, calibration_for
from memoryplatform.text import check_query
from usermemory.selectors import (
    FUSION_CANDIDATES,
    RANKED_MODES,
    SEARCH_MODES,
    _query_vector,
    search_fallbacks,
)

__all__ = ["RANKED_MODES", "SEARCH_MODES", "Ranking", "recall_min_score", "search_ranking"]


class Ranking(NamedTuple):
    """The first stage of a ranked read (main's ``usermemory.sql.search.Ranking``)."""

    query: str
    vector: str | None
    model: str
    fulltext: bool
    config: str
    depth: int
    calibration: Calibration
    min_score: float = 0.0


def recall_min_score(min_score: float | None) -> float:
    """``min_score`` when given, else ``RECALL_MIN_SCORE`` (0.5 until main's setting is merged)."""
    return float(getattr(settings, "RECALL_MIN_SCORE", 0.5)) if min_score is None else min_score


def check_min_score(min_score: float | None) -> float:
    if min_score is None:
        return 0.0
    if not 0.0 <= min_score <= 1.0:
        raise BadRequest("minScore must be between 0 and 1: the probability that a result is relevant.")
    return float(min_score)


def search_ranking(
    *, query: str, mode: str, window: int, min_score: float | None = None
) -> tuple[Ranking, str | None]:
    """The first stage of a ``semantic`` or ``hybrid`` read of ``window`` results, and its fallback:
    "fulltext" when the embedder could not embed the query (counted), both modes then by full text alone."""
    if mode not in RANKED_MODES:
        raise BadRequest(f"mode must be one of {', '.join(RANKED_MODES)} to rank by relevance.")
    if not query:
        raise BadRequest("q is required: the text to search for.")
    check_query(query)
    threshold = check_min_score(min_score)
    embedded = _query_vector(query)
    fallback = None
    if embedded is None:
        fallback = "fulltext"
        search_fallbacks.labels(mode=mode).inc()
    model = embedded[1] if embedded else ""
    ranking = Ranking(
        query=query,
        vector=embedded[0] if embedded else None,
        model=model,
        fulltext=mode == "hybrid" or embedded is None,
        config=settings.SEARCH_LANGUAGE,
        depth=max(FUSION_CANDIDATES, window) if mode == "hybrid" else window,
        calibration=calibration_for(model),
        min_score=threshold,
    )
    return ranking, fallback
