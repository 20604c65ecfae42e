"""Search: the keyword search (a literal substring, newest first) and the ranked search and recall
(``semantic``, ``hybrid`` and its full-text side).

Every candidate of every ranked list comes from the caller's readable entries (:func:`readable`) in the same
statement: visibility is applied before ranking, never after, so it can neither leak nor shorten a list."""

from functools import cache
from typing import Any, NamedTuple

from psycopg import sql

from usermemory.models import MemoryEntry
from usermemory.sql.base import (
    EMBEDDING,
    ENTRY,
    ENTRY_MATCH,
    MIN_CONFIDENCE,
    NO_MATCH,
    EntryMatch,
    Groups,
    RecallScope,
    access_marks,
    entries_of_rows,
    entry_columns,
    fetch_all,
    readable,
    rows_under_recall_lock,
    scope_params,
)

# --- Keyword search ------------------------------------------------------------------------------------

# A literal substring of the casefolded key or value (strpos: no pattern characters), over the user's own
# rows (memory_user_recent_idx); a trigram index cost every write more than it saved a user's search.
_KEYWORD = """SELECT {columns} FROM {entry}
WHERE {readable} AND {min_confidence} AND {match}
    AND (strpos(key_folded, %(folded)s) > 0 OR strpos(text_folded, %(folded)s) > 0)
    AND (%(category)s::text IS NULL OR category = %(category)s)
ORDER BY updated_at DESC, id DESC LIMIT %(limit)s OFFSET %(offset)s"""


@cache
def _keyword_sql(*, agent_view: bool, all_of_agent: bool) -> sql.Composed:
    return sql.SQL(_KEYWORD).format(
        columns=entry_columns(agent_view=agent_view, all_of_agent=all_of_agent),
        entry=ENTRY,
        readable=readable(agent_view=agent_view, all_of_agent=all_of_agent),
        min_confidence=MIN_CONFIDENCE,
        match=ENTRY_MATCH,
    )


def search(
    *,
    user_id: str,
    agent_id: str | None,
    group_ids: Groups,
    agent_view: bool,
    query: str,
    category: str | None,
    limit: int,
    offset: int,
    include_superseded: bool = False,
    min_confidence: float | None = None,
    match: EntryMatch = NO_MATCH,
) -> list[MemoryEntry]:
    """One page of the user's entries (an agent's read: the visible ones; valid now unless
    ``include_superseded``) whose key or value text holds ``query`` as a literal substring, ignoring case
    (full Unicode case folding: ``str.casefold``), newest first."""
    params: dict[str, Any] = {
        **scope_params(
            user_id=user_id,
            agent_id=agent_id,
            group_ids=group_ids,
            include_superseded=include_superseded,
            min_confidence=min_confidence,
        ),
        **match.params(),
        "folded": query.casefold(),
        "category": category or None,
        "limit": limit,
        "offset": offset,
    }
    statement = _keyword_sql(agent_view=agent_view, all_of_agent=group_ids is None)
    return entries_of_rows(fetch_all(statement, params))


# --- Ranked search -------------------------------------------------------------------------------------


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

# The candidates: the readable entries, with their lexemes when the full-text side ranks ({lexemes}).
_VISIBLE = """visible AS MATERIALIZED (
    SELECT id, updated_at{lexemes} FROM {entry}
    WHERE {readable} AND {min_confidence} AND {match}
        AND (%(category)s::text IS NULL OR category = %(category)s)
)"""
_STORED_LEXEMES = ", search_vector AS vec"
_PARSED_LEXEMES = ", to_tsvector(%(config)s::regconfig, key || ' ' || value_text) AS vec"

# Exact cosine distance over the candidates with a vector of the current model.
_SEMANTIC = """sem AS (
    SELECT v.id, (1 - (e.embedding <=> %(vector)s::vector))::float8 AS score
    FROM visible v JOIN {embedding} e ON e.entry_id = v.id AND e.model = %(model)s
    ORDER BY e.embedding <=> %(vector)s::vector, v.id LIMIT %(depth)s
)"""

# BM25 (k1 1.2, b 0.75) of the query's lexemes (any of them; stop words dropped by the configuration), its
# IDF over the candidates; only rows holding a lexeme are unnested. Each step MATERIALIZED: inlined, the
# planner (estimating one row for the unnested lexemes) ran the statistics of the candidates again for every
# matching lexeme (bench/RESULTS.md, session 9).
_FULLTEXT = """terms AS MATERIALIZED (
    SELECT array_agg(lexeme) AS lexemes, string_agg(quote_literal(lexeme), ' | ')::tsquery AS tsq
    FROM unnest(to_tsvector(%(config)s::regconfig, %(query)s))
), stats AS MATERIALIZED (
    SELECT count(*)::float8 AS n, avg(length(vec))::float8 AS avglen FROM visible
), hits AS MATERIALIZED (
    SELECT v.id, u.lexeme, cardinality(u.positions)::float8 AS tf, length(v.vec)::float8 AS len
    FROM visible v, terms t, unnest(v.vec) u
    WHERE v.vec @@ t.tsq AND u.lexeme = ANY(t.lexemes)
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

# Both lists: a convex combination of their scores, each scaled to [0, 1] over its list (min-max; a list of
# one scores 1), plus a small recency prior.
_FUSED = """fused AS (
    SELECT r.id, sum(r.part)::float8
        + %(recency)s * exp(-extract(epoch FROM now() - max(v.updated_at)) / %(half_life)s)::float8 AS score
    FROM (
        SELECT id, %(semantic_weight)s * CASE WHEN max(score) OVER () > min(score) OVER ()
            THEN (score - min(score) OVER ()) / (max(score) OVER () - min(score) OVER ()) ELSE 1 END AS part
        FROM sem
        UNION ALL
        SELECT id, (1 - %(semantic_weight)s) * CASE WHEN max(score) OVER () > min(score) OVER ()
            THEN (score - min(score) OVER ()) / (max(score) OVER () - min(score) OVER ()) ELSE 1 END
        FROM ft
    ) r JOIN visible v ON v.id = r.id
    GROUP BY r.id
)"""

# One page of a ranked list ({ranked}: sem, ft or fused), best first.
_RANKED = """WITH {ctes}
SELECT {columns}, s.score::float8 FROM {ranked} s JOIN {entry} ON {entry}.id = s.id
ORDER BY s.score DESC, {entry}.id LIMIT %(limit)s OFFSET %(offset)s"""

# A ranked recall: the first page of the ranked list, its access marked as a recall marks it.
_RANKED_RECALL = """UPDATE {entry} SET {access_marks}
FROM (SELECT r.id, r.score FROM ({ranked}) AS r) AS ranked
WHERE {entry}.id = ranked.id
RETURNING {columns}, ranked.score"""


@cache
def _ranked_sql(
    *, agent_view: bool, all_of_agent: bool, semantic: bool, fulltext: bool, stored: bool
) -> sql.Composed:
    lexemes = (_STORED_LEXEMES if stored else _PARSED_LEXEMES) if fulltext else ""
    candidates = sql.SQL(_VISIBLE).format(
        lexemes=sql.SQL(lexemes),
        entry=ENTRY,
        readable=readable(agent_view=agent_view, all_of_agent=all_of_agent),
        min_confidence=MIN_CONFIDENCE,
        match=ENTRY_MATCH,
    )
    ctes: list[sql.Composable] = [candidates]
    if semantic:
        ctes.append(sql.SQL(_SEMANTIC).format(embedding=EMBEDDING))
    if fulltext:
        ctes.append(sql.SQL(_FULLTEXT))
    if semantic and fulltext:
        ctes.append(sql.SQL(_FUSED))
    return sql.SQL(_RANKED).format(
        ctes=sql.SQL(", ").join(ctes),
        columns=entry_columns(agent_view=agent_view, all_of_agent=all_of_agent),
        ranked=sql.Identifier("fused" if semantic and fulltext else "sem" if semantic else "ft"),
        entry=ENTRY,
    )


def _ranking_sql(*, agent_view: bool, all_of_agent: bool, ranking: Ranking) -> sql.Composed:
    return _ranked_sql(
        agent_view=agent_view,
        all_of_agent=all_of_agent,
        semantic=ranking.vector is not None,
        fulltext=ranking.fulltext,
        stored=ranking.config == STORED_CONFIG,
    )


@cache
def _ranked_recall_sql(
    *, agent_view: bool, all_of_agent: bool, order: str, semantic: bool, fulltext: bool, stored: bool
) -> sql.Composed:
    # candidates are the agent's visible entries whatever the key's view of ``conflicted``
    ranked = _ranked_sql(
        agent_view=True, all_of_agent=all_of_agent, semantic=semantic, fulltext=fulltext, stored=stored
    )
    return sql.SQL(_RANKED_RECALL).format(
        entry=ENTRY,
        access_marks=access_marks(order=order),
        ranked=ranked,
        columns=entry_columns(agent_view=agent_view, all_of_agent=all_of_agent),
    )


def _ranking_params(ranking: Ranking) -> dict[str, Any]:
    """The ranking's placeholders: each field by its name (``half_life`` in seconds)."""
    return {**ranking._asdict(), "half_life": ranking.half_life_seconds}


def _scored(rows: list[tuple[Any, ...]]) -> list[ScoredEntry]:
    entries = entries_of_rows([row[:-1] for row in rows])
    return [ScoredEntry(entry, float(row[-1])) for entry, row in zip(entries, rows, strict=True)]


def ranked_search(
    *,
    user_id: str,
    agent_id: str | None,
    group_ids: Groups,
    agent_view: bool,
    category: str | None,
    limit: int,
    offset: int,
    include_superseded: bool = False,
    min_confidence: float | None = None,
    ranking: Ranking,
    match: EntryMatch = NO_MATCH,
) -> list[ScoredEntry]:
    """One page of the user's entries (an agent's read: the visible ones; valid now unless
    ``include_superseded``), best first by ``ranking``, each with its score."""
    params: dict[str, Any] = {
        **_ranking_params(ranking),
        **match.params(),
        "category": category or None,
        "limit": limit,
        "offset": offset,
        **scope_params(
            user_id=user_id,
            agent_id=agent_id,
            group_ids=group_ids,
            include_superseded=include_superseded,
            min_confidence=min_confidence,
        ),
    }
    statement = _ranking_sql(agent_view=agent_view, all_of_agent=group_ids is None, ranking=ranking)
    return _scored(fetch_all(statement, params))


def ranked_recall(*, scope: RecallScope, ranking: Ranking, limit: int) -> list[ScoredEntry]:
    """Recall by relevance: the ``limit`` entries of the recall's ``scope`` that :func:`ranked_search` ranks
    first with ``ranking``, with their access marked as a recall marks it
    (:func:`usermemory.sql.base.access_marks`, by the scope's order), best first, each with its score.

    One statement: ``UPDATE .. FROM (the ranked search) .. RETURNING``, so the entries marked are exactly the
    ones returned, and visibility is the ranking's own filter. It runs right after the user's recall lock
    (:func:`usermemory.sql.base.rows_under_recall_lock`), as a recall does. Candidates are the agent's visible
    entries whatever the scope's ``agent_view``."""
    params: dict[str, Any] = {
        **scope.params(),
        **_ranking_params(ranking),
        **NO_MATCH.params(),
        "category": None,
        "limit": limit,
        "offset": 0,
    }
    statement = _ranked_recall_sql(
        agent_view=scope.agent_view,
        all_of_agent=scope.group_ids is None,
        order=scope.order,
        semantic=ranking.vector is not None,
        fulltext=ranking.fulltext,
        stored=ranking.config == STORED_CONFIG,
    )
    scored = _scored(rows_under_recall_lock(statement, params))
    scored.sort(key=lambda s: (-s.score, s.entry.id))  # RETURNING has no order: best first, ties by id
    return scored
