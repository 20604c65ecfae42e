"""Search: the keyword search (a literal substring, newest first) and the ranked search and recall
(``semantic``, ``hybrid`` and its full-text side).

Every candidate of every ranked list comes from the caller's readable entries (:func:`readable`) in the same
statement: visibility is applied before ranking, never after, so it can neither leak nor shorten a list."""

import json
from datetime import datetime
from functools import cache
from typing import Any, NamedTuple

from django.db.models import BooleanField, Q
from django.db.models.expressions import RawSQL
from psycopg import sql

from memoryplatform import ranked
from memoryplatform.ranked import Ranking
from usermemory.models import EntryEmbedding, MemoryEntry
from usermemory.sql.base import (
    EMBEDDING,
    ENTRY,
    MIN_CONFIDENCE,
    Groups,
    RecallScope,
    access_marks,
    entries_of_rows,
    entry_columns,
    fetch_all,
    readable,
    rows_under_recall_lock,
    scope_params,
    visible,
)

# --- Filters ---------------------------------------------------------------------------------------------


class Filters(NamedTuple):
    """What a read narrows to, besides visibility, in the same statement: ``categories`` (any of them),
    ``source`` (the entry's ``source``), ``author`` (the agent that wrote it), ``updated_after``,
    ``key_prefix``, ``visibility`` (one of them) and value ``conditions``, each ``(field, op, operand)``: the
    value's field (a JSON object's) compared as JSON with ``op`` ``eq``, ``ne``, ``gt``, ``gte``, ``lt`` or
    ``lte`` (the last four only between one JSON type; LangGraph's ``filter``). ``None`` narrows nothing."""

    categories: list[str] | None = None
    source: str | None = None
    author: str | None = None
    updated_after: datetime | None = None
    key_prefix: str | None = None
    visibility: str | None = None
    conditions: tuple[tuple[str, str, Any], ...] = ()

    def params(self) -> dict[str, Any]:
        return {
            "categories": self.categories or None,
            "source": self.source,
            "author": self.author,
            "updated_after": self.updated_after,
            "key_prefix": self.key_prefix,
            "only_visibility": self.visibility,
            "conditions": self._conditions(),
        }

    def _conditions(self) -> str | None:
        return json.dumps([list(c) for c in self.conditions]) if self.conditions else None

    def orm(self) -> Q:
        """The same narrowing for an ORM query (a user's list)."""
        q = Q()
        for lookup, value in (
            ("category__in", self.categories or None),
            ("source", self.source),
            ("source_agent_id", self.author),
            ("updated_at__gt", self.updated_after),
            ("key__startswith", self.key_prefix),
            ("visibility", self.visibility),
        ):
            if value is not None:
                q &= Q(**{lookup: value})
        if self.conditions:
            clause = _CONDITIONS.format(conditions="%s")  # a fixed text; the conditions go as a parameter
            q &= Q(RawSQL(clause, [self._conditions()] * 2, BooleanField()))  # noqa: S611
        return q


NO_FILTERS = Filters()

# The value conditions (:class:`Filters`), their placeholder twice. A field of a value that is no JSON object,
# or that lacks it, is NULL: only ``ne`` holds for it.
_CONDITIONS = """({conditions}::jsonb IS NULL OR NOT EXISTS (
        SELECT 1 FROM jsonb_array_elements({conditions}::jsonb) AS c(cond)
        WHERE NOT COALESCE(CASE c.cond ->> 1
            WHEN 'eq' THEN value -> (c.cond ->> 0) = c.cond -> 2
            WHEN 'ne' THEN value -> (c.cond ->> 0) IS DISTINCT FROM c.cond -> 2
            ELSE jsonb_typeof(value -> (c.cond ->> 0)) = jsonb_typeof(c.cond -> 2) AND CASE c.cond ->> 1
                WHEN 'gt' THEN value -> (c.cond ->> 0) > c.cond -> 2
                WHEN 'gte' THEN value -> (c.cond ->> 0) >= c.cond -> 2
                WHEN 'lt' THEN value -> (c.cond ->> 0) < c.cond -> 2
                WHEN 'lte' THEN value -> (c.cond ->> 0) <= c.cond -> 2
            END
        END, false)
    ))"""

# The filters' clause (:class:`Filters`); NULL narrows nothing.
FILTERS = sql.SQL(
    """(%(categories)s::text[] IS NULL OR category = ANY(%(categories)s::text[]))
    AND (%(source)s::text IS NULL OR source = %(source)s::text)
    AND (%(author)s::text IS NULL OR source_agent_id = %(author)s::text)
    AND (%(updated_after)s::timestamptz IS NULL OR updated_at > %(updated_after)s::timestamptz)
    AND (%(key_prefix)s::text IS NULL OR starts_with(key, %(key_prefix)s::text))
    AND (%(only_visibility)s::text IS NULL OR visibility = %(only_visibility)s::text)
    AND """
    + _CONDITIONS.format(conditions="%(conditions)s")
)

# --- Keyword search ------------------------------------------------------------------------------------

# A literal substring of the casefolded key or value (strpos: no pattern characters), over the user's own
# rows (memory_user_recent_idx); a trigram index cost every write more than it saved a user's search.
_KEYWORD = """SELECT {columns} FROM {entry}
WHERE {readable} AND {min_confidence}
    AND (strpos(key_folded, %(folded)s) > 0 OR strpos(text_folded, %(folded)s) > 0)
    AND {filters}
ORDER BY updated_at DESC, id DESC LIMIT %(limit)s OFFSET %(offset)s"""


@cache
def _keyword_sql(*, agent_view: bool, all_of_agent: bool) -> sql.Composed:
    return sql.SQL(_KEYWORD).format(
        columns=entry_columns(agent_view=agent_view, all_of_agent=all_of_agent),
        entry=ENTRY,
        readable=readable(agent_view=agent_view, all_of_agent=all_of_agent),
        min_confidence=MIN_CONFIDENCE,
        filters=FILTERS,
    )


def search(
    *,
    user_id: str,
    agent_id: str | None,
    group_ids: Groups,
    agent_view: bool,
    query: str,
    limit: int,
    offset: int,
    include_superseded: bool = False,
    min_confidence: float | None = None,
    filters: Filters = NO_FILTERS,
) -> list[MemoryEntry]:
    """One page of the user's entries (an agent's read: the visible ones; valid now unless
    ``include_superseded``) whose key or value text holds ``query`` as a literal substring, ignoring case
    (full Unicode case folding: ``str.casefold``), narrowed by ``filters``, newest first."""
    params: dict[str, Any] = {
        **scope_params(
            user_id=user_id,
            agent_id=agent_id,
            group_ids=group_ids,
            include_superseded=include_superseded,
            min_confidence=min_confidence,
        ),
        "folded": query.casefold(),
        **filters.params(),
        "limit": limit,
        "offset": offset,
    }
    statement = _keyword_sql(agent_view=agent_view, all_of_agent=group_ids is None)
    return entries_of_rows(fetch_all(statement, params))


# --- Ranked search -------------------------------------------------------------------------------------


# The candidates: the readable entries, with their lexemes when the full-text side ranks ({lexemes}).
_VISIBLE = """visible AS MATERIALIZED (
    SELECT id, updated_at{lexemes} FROM {entry}
    WHERE {readable} AND {min_confidence} AND {filters}
)"""
_STORED_LEXEMES = ", search_vector AS vec"
_PARSED_LEXEMES = ", to_tsvector(%(config)s::regconfig, key || ' ' || value_text) AS vec"

# Each entry's vector of a model (usermemory.models.EntryEmbedding).
VECTORS = ranked.VectorTable(EMBEDDING, sql.Identifier(EntryEmbedding._meta.get_field("entry").column))


# One page of a ranked list, best first, with each row's score and features.
_RANKED = """WITH {ctes}
SELECT {columns}, s.score, s.cos, s.bm25 FROM ranked s JOIN {entry} ON {entry}.id = s.id
WHERE s.score >= %(min_score)s
ORDER BY s.score DESC, {entry}.id LIMIT %(limit)s OFFSET %(offset)s"""

# A ranked recall: the first page of the ranked list, its access marked as a recall marks it.
_RANKED_RECALL = """UPDATE {entry} SET {access_marks}
FROM (SELECT r.id, r.score, r.cos, r.bm25 FROM ({ranked}) AS r) AS ranked
WHERE {entry}.id = ranked.id
RETURNING {columns}, ranked.score, ranked.cos, ranked.bm25"""

# A recall of entries a second stage chose (:func:`mark_recalled`): the ones still readable, marked.
_MARK_RECALLED = """UPDATE {entry} SET {access_marks}
WHERE {entry}.id = ANY(%(ids)s::bigint[]) AND {readable}
RETURNING {columns}"""


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
        filters=FILTERS,
    )
    ctes = ranked.ranked_ctes(candidates=candidates, vectors=VECTORS, semantic=semantic, fulltext=fulltext)
    return sql.SQL(_RANKED).format(
        ctes=ctes,
        columns=entry_columns(agent_view=agent_view, all_of_agent=all_of_agent),
        entry=ENTRY,
    )


def _ranking_sql(*, agent_view: bool, all_of_agent: bool, ranking: Ranking) -> sql.Composed:
    return _ranked_sql(
        agent_view=agent_view,
        all_of_agent=all_of_agent,
        semantic=ranking.semantic,
        fulltext=ranking.fulltext,
        stored=ranking.stored,
    )


@cache
def _ranked_recall_sql(
    *, agent_view: bool, all_of_agent: bool, order: str, semantic: bool, fulltext: bool, stored: bool
) -> sql.Composed:
    # candidates are the agent's visible entries whatever the key's view of ``conflicted``
    first_page = _ranked_sql(
        agent_view=True, all_of_agent=all_of_agent, semantic=semantic, fulltext=fulltext, stored=stored
    )
    return sql.SQL(_RANKED_RECALL).format(
        entry=ENTRY,
        access_marks=access_marks(order=order),
        ranked=first_page,
        columns=entry_columns(agent_view=agent_view, all_of_agent=all_of_agent),
    )


@cache
def _mark_recalled_sql(*, agent_view: bool, all_of_agent: bool, order: str) -> sql.Composed:
    return sql.SQL(_MARK_RECALLED).format(
        entry=ENTRY,
        access_marks=access_marks(order=order),
        readable=visible(all_of_agent=all_of_agent),
        columns=entry_columns(agent_view=agent_view, all_of_agent=all_of_agent),
    )


class ScoredEntry(NamedTuple):
    """An entry of a ranked read and its score (the probability of relevance,
    :mod:`memoryplatform.relevance`); ``cos`` and ``bm25`` are the first stage's features (``cos`` ``None``
    without a vector)."""

    entry: MemoryEntry
    score: float
    cos: float | None = None
    bm25: float = 0.0


def _scored(rows: list[tuple[Any, ...]]) -> list[ScoredEntry]:
    entries = entries_of_rows([row[:-3] for row in rows])
    return [
        ScoredEntry(entry, float(row[-3]), None if row[-2] is None else float(row[-2]), float(row[-1]))
        for entry, row in zip(entries, rows, strict=True)
    ]


def ranked_search(
    *,
    user_id: str,
    agent_id: str | None,
    group_ids: Groups,
    agent_view: bool,
    limit: int,
    offset: int,
    include_superseded: bool = False,
    min_confidence: float | None = None,
    ranking: Ranking,
    filters: Filters = NO_FILTERS,
) -> list[ScoredEntry]:
    """One page of the user's entries (an agent's read: the visible ones; valid now unless
    ``include_superseded``) narrowed by ``filters``, best first by ``ranking``, each with its score."""
    params: dict[str, Any] = {
        **ranked.ranking_params(ranking),
        **filters.params(),
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


def ranked_recall(
    *, scope: RecallScope, ranking: Ranking, limit: int, filters: Filters = NO_FILTERS
) -> list[ScoredEntry]:
    """Recall by relevance: the ``limit`` entries of the recall's ``scope`` that :func:`ranked_search` ranks
    first with ``ranking``, with their access marked as a recall marks it
    (:func:`usermemory.sql.base.access_marks`, by the scope's order), best first, each with its score.

    One statement: ``UPDATE .. FROM (the ranked search) .. RETURNING``, so the entries marked are exactly the
    ones returned, and visibility is the ranking's own filter. It runs right after the user's recall lock
    (:func:`usermemory.sql.base.rows_under_recall_lock`), as a recall does. Candidates are the agent's visible
    entries whatever the scope's ``agent_view``."""
    params: dict[str, Any] = {
        **scope.params(),
        **ranked.ranking_params(ranking),
        **filters.params(),
        "limit": limit,
        "offset": 0,
    }
    statement = _ranked_recall_sql(
        agent_view=scope.agent_view,
        all_of_agent=scope.group_ids is None,
        order=scope.order,
        semantic=ranking.semantic,
        fulltext=ranking.fulltext,
        stored=ranking.stored,
    )
    return _best_first(_scored(rows_under_recall_lock(statement, params)))


def mark_recalled(*, scope: RecallScope, chosen: list[ScoredEntry]) -> list[ScoredEntry]:
    """The recall of entries a second stage chose from :func:`ranked_search`'s candidates: those of
    ``chosen`` still visible to the scope's agent, their access marked as a recall marks it, in one
    statement after the user's recall lock, best first with the scores they were chosen with."""
    if not chosen:
        return []
    by_id = {scored.entry.id: scored for scored in chosen}
    params = {**scope.params(), "ids": list(by_id)}
    statement = _mark_recalled_sql(
        agent_view=scope.agent_view, all_of_agent=scope.group_ids is None, order=scope.order
    )
    entries = entries_of_rows(rows_under_recall_lock(statement, params))
    return _best_first([by_id[entry.id]._replace(entry=entry) for entry in entries])


def _best_first(scored: list[ScoredEntry]) -> list[ScoredEntry]:
    scored.sort(key=lambda s: (-s.score, s.entry.id))  # RETURNING has no order: best first, ties by id
    return scored
