"""The ranked read, written once for every store that ranks rows by meaning and words (memory entries and
messages): the first stage's statement, semantic, full text or hybrid, scored by
:mod:`memoryplatform.relevance`.

A store gives two things and keeps the rest of its statement:

- its candidates, a CTE named ``visible`` of ``id`` (and ``vec``, the row's lexemes, when full text ranks):
  the rows the caller may read, narrowed by the store's filters. Visibility is so applied before ranking,
  never after: it can neither leak nor shorten a list, and BM25's statistics are those of what the caller
  may read;
- its vector table (:class:`VectorTable`): the table holding each row's vector of a model, and its column
  naming the row.

:func:`ranked_ctes` composes the CTEs from ``visible`` to ``ranked(id, cos, bm25, score)``: the features of
each candidate (``cos`` NULL without a vector, ``bm25`` 0 outside the full-text list) and its calibrated
score. The store joins ``ranked`` to its rows, keeps those scoring at least the ranking's ``min_score`` (0
unless the caller gives one: no default cut) and pages them. :func:`ranking_params` fills the kit's
placeholders. ``tests/memoryplatform/sql/`` holds each composed statement as text (``test_ranked_sql.py``)."""

from typing import Any, NamedTuple

from psycopg import sql

from memoryplatform import relevance
from memoryplatform.relevance import Calibration
from memoryplatform.store import STORED_SEARCH_CONFIG

# The configuration of the stored ``search_vector`` columns (memoryplatform.store.STORED_SEARCH_CONFIG): with
# it, the full-text side reads each row's lexemes instead of parsing its text on every query. Any other
# SEARCH_LANGUAGE parses on the fly.
STORED_CONFIG = STORED_SEARCH_CONFIG


class Ranking(NamedTuple):
    """How a ranked read ranks (:func:`usermemory.ranking.search_ranking` makes it).

    ``vector`` (a pgvector literal of the query) ranks by cosine similarity to the vectors of ``model``;
    ``fulltext`` by BM25 of the query's lexemes in ``config`` (any of them); both: the candidates of either
    list (its first ``depth``), each scored by the calibrated logistic model of both features
    (:mod:`memoryplatform.relevance`). The score is the probability of relevance; ties break by id. Rows
    scoring under ``min_score`` (the caller's; 0 by default) are left out. ``config`` :data:`STORED_CONFIG`
    reads the stored ``search_vector``; any other parses the text."""

    query: str
    vector: str | None
    model: str
    fulltext: bool
    config: str
    depth: int
    calibration: Calibration
    min_score: float = 0.0

    def without_threshold(self) -> "Ranking":
        """The same ranking keeping every row (a second stage's candidates: it applies the threshold)."""
        return self._replace(min_score=0.0)

    @property
    def semantic(self) -> bool:
        return self.vector is not None

    @property
    def stored(self) -> bool:
        """Whether the full-text side reads the stored lexemes (else it parses the text)."""
        return self.config == STORED_CONFIG


class VectorTable(NamedTuple):
    """Where a store's vectors are: the table (``embedding``, ``model``) and its column naming the ranked
    row (``entry_id``, ``message_id``), one vector a row."""

    table: sql.Identifier
    row: sql.Identifier


def ranking_params(ranking: Ranking) -> dict[str, Any]:
    """The kit's placeholders: each field of the ranking by its name (``min_score`` the threshold) and the
    calibration's weights."""
    params = ranking._asdict()
    del params["calibration"]
    return {**params, **ranking.calibration.params()}


# Exact cosine similarity over the candidates with a vector of the current model. The query's literal is typed
# ``vector``: against the ``halfvec`` column pgvector converts it once (its implicit cast, folded into a
# constant at planning), so the distance is computed over the stored halves; the same statement reads a
# ``vector`` column at full precision, which is how bench/vector_storage.py measures both.
_SEMANTIC = sql.SQL(
    """sem AS (
    SELECT v.id, (1 - (e.embedding <=> %(vector)s::vector))::float8 AS score
    FROM visible v JOIN {vectors} e ON e.{row} = v.id AND e.model = %(model)s
    ORDER BY e.embedding <=> %(vector)s::vector, v.id LIMIT %(depth)s
)"""
)

# BM25 (k1 1.2, b 0.75) of the query's lexemes (any of them; stop words dropped by the configuration), its
# IDF over the candidates, counted as at least 20: a store of a few rows is taken as one of 20 whose other
# rows lack the query's words, so that a word a lone memory holds weighs as it would among 20, not next to
# nothing (bench/RESULTS.md, session 15). Only rows holding a lexeme are unnested, and of each only the
# query's lexemes: setweight marks them (weight A; the stored and parsed vectors carry none) and ts_filter
# keeps the marked ones, both in C, so a row of 25 lexemes unnests the 1 or 2 the query holds (unnesting the
# whole vector was half of a hybrid statement: bench/RESULTS.md, session 15). Each step MATERIALIZED: inlined,
# the planner (estimating one row for the unnested lexemes) ran the statistics of the candidates again for
# every matching lexeme (bench/RESULTS.md, session 9).
_FULLTEXT = sql.SQL(
    """terms AS MATERIALIZED (
    SELECT array_agg(lexeme) AS lexemes, string_agg(quote_literal(lexeme), ' | ')::tsquery AS tsq
    FROM unnest(to_tsvector(%(config)s::regconfig, %(query)s))
), stats AS MATERIALIZED (
    SELECT greatest(count(*), 20)::float8 AS n, avg(length(vec))::float8 AS avglen FROM visible
), hits AS MATERIALIZED (
    SELECT v.id, u.lexeme, cardinality(u.positions)::float8 AS tf, length(v.vec)::float8 AS len
    FROM visible v, terms t, unnest(ts_filter(setweight(v.vec, 'A', t.lexemes), '{a}')) u
    WHERE v.vec @@ t.tsq
), df AS MATERIALIZED (
    SELECT lexeme, count(*)::float8 AS df FROM hits GROUP BY lexeme
), ft AS (
    SELECT h.id, sum(
        ln(1 + (s.n - df.df + 0.5) / (df.df + 0.5)) * h.tf * 2.2
        / (h.tf + 1.2 * (0.25 + 0.75 * h.len / greatest(s.avglen, 1)))
    ) AS score
    FROM hits h JOIN df USING (lexeme), stats s
    GROUP BY h.id ORDER BY score DESC, h.id LIMIT %(depth)s
)"""
)

# Each candidate's features: ``cos`` (NULL without a vector) and ``bm25`` (0 outside the full-text list).
_FEATURES_SEMANTIC = sql.SQL("features AS (SELECT id, score AS cos, 0::float8 AS bm25 FROM sem)")
_FEATURES_FULLTEXT = sql.SQL("features AS (SELECT id, NULL::float8 AS cos, score AS bm25 FROM ft)")
# Hybrid: the candidates of either list; a full-text candidate's cosine is computed too (NULL without a
# vector: it is scored by full text alone), each by its own index lookup (LATERAL), never a join over the
# whole vector table.
_FEATURES_HYBRID = sql.SQL(
    """features AS (
    SELECT c.id, x.cos, coalesce(f.score, 0)::float8 AS bm25
    FROM (SELECT id FROM sem UNION SELECT id FROM ft) c
    LEFT JOIN ft f ON f.id = c.id
    LEFT JOIN LATERAL (
        SELECT (1 - (e.embedding <=> %(vector)s::vector))::float8 AS cos FROM {vectors} e
        WHERE e.{row} = c.id AND e.model = %(model)s
    ) x ON true
)"""
)

# The calibrated probability of relevance of each candidate.
_RANKED = sql.SQL("ranked AS (SELECT id, cos, bm25, {score} AS score FROM features)")


def ranked_ctes(
    *, candidates: sql.Composable, vectors: VectorTable, semantic: bool, fulltext: bool
) -> sql.Composed:
    """The CTEs of a ranked read, from the store's ``candidates`` (the ``visible`` CTE) to
    ``ranked(id, cos, bm25, score)``: by meaning (``semantic``), by words (``fulltext``) or both."""
    if not (semantic or fulltext):
        raise ValueError("A ranked read ranks by meaning, by words, or both.")
    parts = {"vectors": vectors.table, "row": vectors.row}
    ctes: list[sql.Composable] = [candidates]
    if semantic:
        ctes.append(_SEMANTIC.format(**parts))
    if fulltext:
        ctes.append(_FULLTEXT)
    cos, bm25 = sql.SQL("cos"), sql.SQL("bm25")
    if semantic and fulltext:
        ctes.append(_FEATURES_HYBRID.format(**parts))
        score = relevance.hybrid_score(cos=cos, bm25=bm25)
    elif semantic:
        ctes.append(_FEATURES_SEMANTIC)
        score = relevance.semantic_score(cos=cos)
    else:
        ctes.append(_FEATURES_FULLTEXT)
        score = relevance.fulltext_score(bm25=bm25)
    ctes.append(_RANKED.format(score=score))
    return sql.SQL(", ").join(ctes)
