"""Hand-written SQL of the ranked per-user search (``semantic``, ``hybrid`` and its full-text side).

The same rules as :mod:`usermemory.store`: one function per statement, keyword-only arguments, ``%(name)s``
placeholders filled from a dict built in the function that runs the statement, typed results. Every candidate
of every ranked list comes from the caller's visible entries (:func:`usermemory.store.visible_where`) in the
same statement: visibility is applied before ranking, never after, so it can neither leak nor shorten a list.
"""

from datetime import datetime
from functools import cache
from typing import Any, NamedTuple

from django.db import connection

from usermemory.models import MemoryEntry
from usermemory.store import (
    EMBEDDING_TABLE,
    ENTRY_TABLE,
    MIN_CONFIDENCE_WHERE,
    Groups,
    access_marks,
    entries_of_rows,
    entry_columns,
    readable_where,
    rows_under_recall_lock,
    scope_params,
)


class ScoredEntry(NamedTuple):
    entry: MemoryEntry
    score: float


class Ranking(NamedTuple):
    """How a ranked read ranks (:func:`usermemory.selectors.search_ranking` makes it).

    ``vector`` (a pgvector literal of the query) ranks by cosine similarity to the vectors of ``model``;
    ``fulltext`` by BM25 of the query's lexemes in ``config`` (any of them); both: ``semantic_weight`` times
    the semantic score plus the rest times the BM25 score, each scaled to [0, 1] over its list's first
    ``depth`` (min-max), plus ``recency * exp(-age / half_life_seconds)``. Ties break by id. ``config``
    ``memory_simple`` reads the stored ``search_vector``; any other parses the text."""

    query: str
    vector: str | None
    model: str
    fulltext: bool
    config: str
    depth: int
    semantic_weight: float
    recency: float
    half_life_seconds: float


# The configuration of the stored ``search_vector`` column (migration 0011): with it, the full-text side reads
# each row's lexemes instead of parsing its text on every query. Any other SEARCH_LANGUAGE parses on the fly.
STORED_CONFIG = "memory_simple"
_PARSED = "to_tsvector(%(config)s::regconfig, key || ' ' || value_text)"
# The query's lexemes, stop words dropped by the configuration, as an array and as an OR of them.
_TERMS = (
    "terms AS MATERIALIZED (SELECT array_agg(lexeme) AS lexemes, "
    "string_agg(quote_literal(lexeme), ' | ')::tsquery AS tsq "
    "FROM unnest(to_tsvector(%(config)s::regconfig, %(query)s)))"
)
# BM25 (k1 1.2, b 0.75) of one lexeme in one row, its IDF over the caller's visible rows.
_BM25 = (
    "ln(1 + (s.n - df.df + 0.5) / (df.df + 0.5)) * h.tf * 2.2 / "
    "(h.tf + 1.2 * (0.25 + 0.75 * h.len / greatest(s.avglen, 1)))"
)
# A list's score scaled to [0, 1] over its candidates (min-max); a list of one scores 1.
_SCALED = (
    "CASE WHEN max(score) OVER () > min(score) OVER () "
    "THEN (score - min(score) OVER ()) / (max(score) OVER () - min(score) OVER ()) ELSE 1 END"
)


@cache
def _ranked_sql(
    *,
    agent_view: bool,
    all_of_agent: bool,
    category: bool,
    semantic: bool,
    fulltext: bool,
    stored: bool,
) -> str:
    where = readable_where(agent_view=agent_view, all_of_agent=all_of_agent)
    where += MIN_CONFIDENCE_WHERE
    if category:
        where += " AND category = %(category)s"
    lexemes = (", search_vector AS vec" if stored else f", {_PARSED} AS vec") if fulltext else ""
    ctes = [f"visible AS MATERIALIZED (SELECT id, updated_at{lexemes} FROM {ENTRY_TABLE} WHERE {where})"]
    ranked: list[str] = []
    if semantic:  # exact cosine distance over the visible rows with a vector of the current model
        distance = "e.embedding <=> %(vector)s::vector"
        ctes.append(
            f"sem AS (SELECT v.id, (1 - ({distance}))::float8 AS score FROM visible v "
            f"JOIN {EMBEDDING_TABLE} e ON e.entry_id = v.id AND e.model = %(model)s "
            f"ORDER BY {distance}, v.id LIMIT %(depth)s)"
        )
        ranked.append("sem")
    if fulltext:  # BM25 of the query's lexemes (any of them); only rows holding one are unnested
        # Each step MATERIALIZED: inlined, the planner (estimating one row for the unnested lexemes) ran the
        # statistics of the visible rows again for every matching lexeme (bench/RESULTS.md, session 9).
        ctes += [
            _TERMS,
            "stats AS MATERIALIZED (SELECT count(*)::float8 AS n, avg(length(vec))::float8 AS avglen "
            "FROM visible)",
            "hits AS MATERIALIZED (SELECT v.id, u.lexeme, cardinality(u.positions)::float8 AS tf, "
            "length(v.vec)::float8 AS len FROM visible v, terms t, unnest(v.vec) u "
            "WHERE v.vec @@ t.tsq AND u.lexeme = ANY(t.lexemes))",
            "df AS MATERIALIZED (SELECT lexeme, count(*)::float8 AS df FROM hits GROUP BY lexeme)",
            f"ft AS (SELECT h.id, sum({_BM25}) AS score FROM hits h JOIN df USING (lexeme), stats s "
            f"GROUP BY h.id ORDER BY score DESC, h.id LIMIT %(depth)s)",
        ]
        ranked.append("ft")
    if len(ranked) == 2:  # convex combination of the two lists' scaled scores, plus a small recency prior
        ctes.append(
            f"fused AS (SELECT r.id, sum(r.part)::float8 + %(recency)s * "
            f"exp(-extract(epoch FROM now() - max(v.updated_at)) / %(half_life)s)::float8 AS score "
            f"FROM (SELECT id, %(semantic_weight)s * {_SCALED} AS part FROM sem UNION ALL "
            f"SELECT id, (1 - %(semantic_weight)s) * {_SCALED} FROM ft) r "
            f"JOIN visible v ON v.id = r.id GROUP BY r.id)"
        )
        source = "fused"
    else:
        source = ranked[0]
    columns = entry_columns(agent_view=agent_view, all_of_agent=all_of_agent)
    return (
        f"WITH {', '.join(ctes)} SELECT {columns}, s.score::float8 FROM {source} s "
        f"JOIN {ENTRY_TABLE} ON {ENTRY_TABLE}.id = s.id "
        f"ORDER BY s.score DESC, {ENTRY_TABLE}.id LIMIT %(limit)s OFFSET %(offset)s"
    )


def _ranking_sql(*, agent_view: bool, all_of_agent: bool, category: bool, ranking: Ranking) -> str:
    return _ranked_sql(
        agent_view=agent_view,
        all_of_agent=all_of_agent,
        category=category,
        semantic=ranking.vector is not None,
        fulltext=ranking.fulltext,
        stored=ranking.config == STORED_CONFIG,
    )


def _ranking_params(ranking: Ranking) -> dict[str, Any]:
    return {
        "query": ranking.query,
        "vector": ranking.vector,
        "model": ranking.model,
        "config": ranking.config,
        "depth": ranking.depth,
        "semantic_weight": ranking.semantic_weight,
        "recency": ranking.recency,
        "half_life": ranking.half_life_seconds,
    }


def ranked_search(
    *,
    user_id: str,
    agent_id: str | None,
    group_ids: Groups,
    agent_view: bool,
    ranking: Ranking,
    category: str | None,
    limit: int,
    offset: int,
    include_superseded: bool = False,
    min_confidence: float | None = None,
) -> list[ScoredEntry]:
    """One page of the user's entries (an agent's read: the visible ones; valid now unless
    ``include_superseded``), best first by ``ranking``, each with its score."""
    params: dict[str, Any] = {
        **scope_params(
            user_id=user_id,
            agent_id=agent_id,
            group_ids=group_ids,
            include_superseded=include_superseded,
            min_confidence=min_confidence,
        ),
        **_ranking_params(ranking),
        "category": category,
        "limit": limit,
        "offset": offset,
    }
    sql = _ranking_sql(
        agent_view=agent_view, all_of_agent=group_ids is None, category=bool(category), ranking=ranking
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    return _scored(rows)


def _scored(rows: list[Any]) -> list[ScoredEntry]:
    entries = entries_of_rows([row[:-1] for row in rows])
    return [ScoredEntry(entry, float(row[-1])) for entry, row in zip(entries, rows, strict=True)]


def ranked_recall(
    *,
    user_id: str,
    agent_id: str,
    group_ids: Groups,
    agent_view: bool,
    ranking: Ranking,
    limit: int,
    order: str,
    threshold: datetime,
    now: datetime,
    min_confidence: float | None = None,
) -> list[ScoredEntry]:
    """Recall by relevance: the ``limit`` entries visible to ``agent_id`` (in ``group_ids``) that
    :func:`ranked_search` ranks first with ``ranking``, with their access marked as a recall marks it
    (:func:`usermemory.store.access_marks`, by ``order``), best first, each with its score.

    One statement: ``UPDATE .. FROM (the ranked search) .. RETURNING``, so the entries marked are exactly the
    ones returned, and visibility is the ranking's own filter. It runs right after the user's recall lock
    (:func:`usermemory.store.rows_under_recall_lock`), as a recall does. ``agent_view``: the ``conflicted``
    flag the agent may see (an agent key's read), else the stored one; candidates are the agent's visible
    entries either way."""
    params: dict[str, Any] = {
        **scope_params(
            user_id=user_id, agent_id=agent_id, group_ids=group_ids, min_confidence=min_confidence
        ),
        **_ranking_params(ranking),
        "category": None,
        "limit": limit,
        "offset": 0,
        "threshold": threshold,
        "now": now,
    }
    all_of_agent = group_ids is None
    ranked = _ranking_sql(agent_view=True, all_of_agent=all_of_agent, category=False, ranking=ranking)
    columns = entry_columns(agent_view=agent_view, all_of_agent=all_of_agent)
    sql = (
        f"UPDATE {ENTRY_TABLE} SET {access_marks(order=order)} "
        f"FROM (SELECT r.id, r.score FROM ({ranked}) AS r) AS ranked "
        f"WHERE {ENTRY_TABLE}.id = ranked.id RETURNING {columns}, ranked.score"
    )
    scored = _scored(rows_under_recall_lock(sql, params))
    scored.sort(key=lambda s: (-s.score, s.entry.id))  # RETURNING has no order: best first, ties by id
    return scored
