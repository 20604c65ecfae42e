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
    Groups,
    access_marks,
    entries_of_rows,
    entry_columns,
    rows_under_recall_lock,
    scope_params,
    visible_where,
)


class ScoredEntry(NamedTuple):
    entry: MemoryEntry
    score: float


class Ranking(NamedTuple):
    """How a ranked read ranks: the ranking arguments of :func:`ranked_search`, in one value
    (:func:`usermemory.selectors.search_ranking` makes it)."""

    query: str
    vector: str | None
    model: str
    fulltext: bool
    config: str
    depth: int
    k: int
    recency: float
    half_life_seconds: float


_TSVECTOR = "to_tsvector(%(config)s::regconfig, v.key || ' ' || v.value_text)"


@cache
def _ranked_sql(
    *, agent_view: bool, all_of_agent: bool, category: bool, semantic: bool, fulltext: bool
) -> str:
    where = visible_where(all_of_agent=all_of_agent) if agent_view else "user_id = %(user)s"
    if category:
        where += " AND category = %(category)s"
    ctes = [
        f"visible AS MATERIALIZED (SELECT id, key, value_text, updated_at FROM {ENTRY_TABLE} WHERE {where})"
    ]
    ranked: list[str] = []
    if semantic:  # exact cosine distance over the visible rows with a vector of the current model
        distance = "e.embedding <=> %(vector)s::vector"
        ctes.append(
            f"sem AS (SELECT v.id, 1 - ({distance}) AS score, row_number() OVER (ORDER BY {distance}, v.id) "
            f"AS rank FROM visible v JOIN {EMBEDDING_TABLE} e ON e.entry_id = v.id AND e.model = %(model)s "
            f"ORDER BY rank LIMIT %(depth)s)"
        )
        ranked.append("sem")
    if fulltext:  # BM25 (k1 1.2, b 0.75) of the query's lexemes, IDF over the caller's visible rows
        bm25 = (
            "ln(1 + (s.n - df.df + 0.5) / (df.df + 0.5)) * h.tf * 2.2 / "
            "(h.tf + 1.2 * (0.25 + 0.75 * h.len / greatest(s.avglen, 1)))"
        )
        ctes += [
            f"docs AS (SELECT v.id, {_TSVECTOR} AS vec FROM visible v)",
            "stats AS (SELECT count(*)::float8 AS n, avg(length(vec))::float8 AS avglen FROM docs)",
            "hits AS (SELECT d.id, u.lexeme, cardinality(u.positions)::float8 AS tf, length(d.vec)::float8 "
            "AS len FROM docs d, unnest(d.vec) u WHERE u.lexeme IN "
            "(SELECT lexeme FROM unnest(to_tsvector(%(config)s::regconfig, %(query)s))))",
            "df AS (SELECT lexeme, count(*)::float8 AS df FROM hits GROUP BY lexeme)",
            f"ft AS (SELECT h.id, sum({bm25}) AS score, row_number() OVER (ORDER BY sum({bm25}) DESC, h.id) "
            f"AS rank FROM hits h JOIN df USING (lexeme), stats s GROUP BY h.id "
            f"ORDER BY rank LIMIT %(depth)s)",
        ]
        ranked.append("ft")
    if len(ranked) == 2:  # reciprocal rank fusion, plus a small recency prior (decaying with the age)
        ctes.append(
            "fused AS (SELECT r.id, sum(1.0 / (%(k)s + r.rank))::float8 + %(recency)s * "
            "exp(-extract(epoch FROM now() - max(v.updated_at)) / %(half_life)s)::float8 AS score "
            "FROM (SELECT id, rank FROM sem UNION ALL SELECT id, rank FROM ft) r "
            "JOIN visible v ON v.id = r.id GROUP BY r.id)"
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


def ranked_search(
    *,
    user_id: str,
    agent_id: str | None,
    group_ids: Groups,
    agent_view: bool,
    query: str,
    vector: str | None,
    model: str,
    fulltext: bool,
    config: str,
    category: str | None,
    depth: int,
    k: int,
    recency: float,
    half_life_seconds: float,
    limit: int,
    offset: int,
) -> list[ScoredEntry]:
    """One page of the user's entries (an agent's read: the visible ones), best first, each with its score.

    With ``vector`` (a pgvector literal of the query) alone: by cosine similarity to the vectors of ``model``.
    With ``fulltext`` alone: by BM25 of the query's lexemes in ``config`` (any of them). With both: by
    reciprocal rank fusion of the two lists' first ``depth`` (``1 / (k + rank)`` summed) plus
    ``recency * exp(-age / half_life_seconds)``. Ties break by id."""
    params: dict[str, Any] = {
        **scope_params(user_id=user_id, agent_id=agent_id, group_ids=group_ids),
        "category": category,
        "query": query,
        "vector": vector,
        "model": model,
        "config": config,
        "depth": depth,
        "k": k,
        "recency": recency,
        "half_life": half_life_seconds,
        "limit": limit,
        "offset": offset,
    }
    sql = _ranked_sql(
        agent_view=agent_view,
        all_of_agent=group_ids is None,
        category=bool(category),
        semantic=vector is not None,
        fulltext=fulltext,
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
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
        **scope_params(user_id=user_id, agent_id=agent_id, group_ids=group_ids),
        **ranking._asdict(),  # psycopg reads the placeholders it needs and leaves the rest
        "half_life": ranking.half_life_seconds,
        "category": None,
        "limit": limit,
        "offset": 0,
        "threshold": threshold,
        "now": now,
    }
    all_of_agent = group_ids is None
    ranked = _ranked_sql(
        agent_view=True,
        all_of_agent=all_of_agent,
        category=False,
        semantic=ranking.vector is not None,
        fulltext=ranking.fulltext,
    )
    columns = entry_columns(agent_view=agent_view, all_of_agent=all_of_agent)
    sql = (
        f"UPDATE {ENTRY_TABLE} SET {access_marks(order=order)} "
        f"FROM (SELECT r.id, r.score FROM ({ranked}) AS r) AS ranked "
        f"WHERE {ENTRY_TABLE}.id = ranked.id RETURNING {columns}, ranked.score"
    )
    rows = rows_under_recall_lock(sql, params)
    entries = entries_of_rows([row[:-1] for row in rows])
    scored = [ScoredEntry(entry, float(row[-1])) for entry, row in zip(entries, rows, strict=True)]
    scored.sort(key=lambda s: (-s.score, s.entry.id))  # RETURNING has no order: best first, ties by id
    return scored
