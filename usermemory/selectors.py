"""Reads of user memory. Every read made with an agent key goes through :func:`memory_readable_for`, or for
search and recall (the hottest reads) the same condition written as SQL (:mod:`usermemory.sql.base`), so
list, search, recall, category, key, count and history all show only what that agent may see."""

import logging
import re
from datetime import datetime
from functools import reduce
from operator import or_
from typing import Any, Literal, TypeVar, overload

from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.search import SearchQueryField, SearchVector
from django.db.models import (
    BigIntegerField,
    BooleanField,
    Case,
    Exists,
    Func,
    IntegerField,
    Model,
    OuterRef,
    Q,
    QuerySet,
    Value,
    When,
)
from django.db.models.expressions import CombinedExpression
from django.db.models.functions import Now
from django.utils import timezone

from apikeys import selectors as apikeys_selectors
from apikeys.caller import Caller
from apikeys.models import Agent
from memoryplatform import publicids
from memoryplatform.errors import BadRequest, Forbidden, NotFound
from memoryplatform.text import check_query, json_problem
from usermemory import metrics
from usermemory import ranking as ranking_
from usermemory.keynames import key_pattern_regex
from usermemory.models import AgentMemoryPolicy, MemoryEntry, MemoryEntryGroup, MemoryEvent, Visibility
from usermemory.policies import policy_parts
from usermemory.ranking import RankedSearch
from usermemory.sql import history as history_sql
from usermemory.sql import search as search_sql
from usermemory.sql.search import NO_FILTERS, Filters

logger = logging.getLogger(__name__)
M = TypeVar("M", bound=Model)

LIST_ORDER = ("-updated_at", "-id")
# Dream's history events about a (user, key) set, which spans entries an agent may not see.
CONFLICT_ACTIONS = (MemoryEvent.Action.FLAGGED, MemoryEvent.Action.UNFLAGGED)


def policy_for_agent(*, agent_id: str | None) -> AgentMemoryPolicy:
    """The agent's stored policy, or the defaults (unsaved) when it has none or there is no agent."""
    if agent_id is None:
        return AgentMemoryPolicy()
    policy = AgentMemoryPolicy.objects.filter(agent_id=agent_id).first()
    return policy if policy is not None else AgentMemoryPolicy(agent_id=agent_id)


def policy_row(model: type[M], *, agent_id: str) -> M:
    """An agent's row of one policy part (:mod:`usermemory.policies`), or its defaults (unsaved) when it has
    none."""
    row = model._default_manager.filter(pk=agent_id).first()
    return row if row is not None else model(pk=agent_id)


def policy_values(*, agent_id: str) -> dict[str, Any]:
    """The agent's whole policy as one document: every part's fields by name, a part without a row with its
    defaults (one query a part)."""
    values: dict[str, Any] = {}
    for part in policy_parts():
        row = policy_row(part.model, agent_id=agent_id)
        values.update((name, getattr(row, name)) for name in part.fields)
    return values


def agent_group_ids(*, agent_id: str) -> list[str]:
    return list(apikeys_selectors.agent_group_ids(agent_id=agent_id))


def policy_for_caller(*, caller: Caller, agent_id: str | None) -> AgentMemoryPolicy:
    """The policy of the agent a call is for. An agent key's own policy was read with the key (one query,
    :func:`apikeys.services.apikey_authenticate`), so it costs nothing here."""
    agent = caller.agent
    if agent is not None and agent.id == agent_id:
        try:
            return agent.memory_policy
        except AgentMemoryPolicy.DoesNotExist:
            return AgentMemoryPolicy(agent_id=agent_id)
    return policy_for_agent(agent_id=agent_id)


def recall_top_k_for(*, caller: Caller) -> int:
    """How many results a read by relevance for an agent's context returns by default: the agent's
    ``recallTopK`` (at most its ``maxRecallEntries``); a viewer's or admin's, the policy's default."""
    if caller.agent_id is None:
        return AgentMemoryPolicy(agent_id="").recall_top_k
    policy = policy_for_caller(caller=caller, agent_id=caller.agent_id)
    return min(policy.recall_top_k, policy.max_recall_entries)


# A read's groups: the ones named, or ``ALL_OF_AGENT``: every group the agent is a member of, which the query
# reads itself (a subquery), so it costs no round trip.
ALL_OF_AGENT = None
Groups = list[str] | None


def visible_q(*, user_id: str, agent_id: str, group_ids: Groups) -> Q:
    """Visible(user, agent, groups): global, or self owned by the agent, or group meeting the groups."""
    condition = Q(visibility=Visibility.GLOBAL) | Q(visibility=Visibility.SELF, source_agent_id=agent_id)
    if group_ids is ALL_OF_AGENT or group_ids:
        groups = (
            apikeys_selectors.agent_group_ids(agent_id=agent_id) if group_ids is ALL_OF_AGENT else group_ids
        )
        in_groups = MemoryEntryGroup.objects.filter(user_id=user_id, group_id__in=groups)
        condition |= Q(visibility=Visibility.GROUP, id__in=in_groups.values("entry_id"))
    return Q(user_id=user_id) & condition


@overload
def resolve_read_scope(
    *, caller: Caller, agent_id: str | None, group_ids: list[str] | None, require_agent: Literal[True]
) -> tuple[str, Groups]: ...
@overload
def resolve_read_scope(
    *, caller: Caller, agent_id: str | None, group_ids: list[str] | None, require_agent: bool
) -> tuple[str | None, Groups]: ...
def resolve_read_scope(
    *, caller: Caller, agent_id: str | None, group_ids: list[str] | None, require_agent: bool
) -> tuple[str | None, Groups]:
    """The (agent, groups) a read is made for, applying the agent-key rules.

    An agent key reads as itself (naming another agent is 403) within the groups it names (a group it is not
    in is 403), or all its groups (``ALL_OF_AGENT``) when it names none. A viewer or admin names the agent
    where one matters.
    """
    if caller.is_agent:
        if agent_id and agent_id != caller.agent_id:
            raise Forbidden(f"An agent key for '{caller.agent_id}' cannot read as agent '{agent_id}'.")
        own = caller.acting_agent_id
        if group_ids:
            member_of = agent_group_ids(agent_id=own)
            outside = sorted(set(group_ids) - set(member_of))
            if outside:
                raise Forbidden(
                    f"Agent '{own}' is not a member of group(s): {', '.join(outside)}.",
                    details={"groups": outside},
                )
            return own, list(dict.fromkeys(group_ids))
        return own, ALL_OF_AGENT
    if not agent_id:
        if require_agent:
            raise BadRequest("agentId is required with a viewer or admin key.")
        return None, list(group_ids or [])
    if not Agent.objects.filter(id=agent_id).exists():
        raise NotFound(f"No agent '{agent_id}'.")
    if group_ids:
        return agent_id, list(dict.fromkeys(group_ids))
    return agent_id, ALL_OF_AGENT


def visibility_rule(*, entry: MemoryEntry, agent_id: str, group_ids: list[str]) -> str:
    """Which part of :func:`visible_q` admits ``entry`` for the agent (in ``group_ids``): ``owner`` (its own
    self entry), ``group: <groups it shares>`` or ``global``. A label for staff; reads filter by visible_q."""
    if entry.visibility == Visibility.GLOBAL:
        return "global"
    if entry.visibility == Visibility.SELF:
        return "owner"
    shared = [g for g in entry.group_ids or [] if g in group_ids]
    return f"group: {', '.join(shared)}"


def current_q() -> Q:
    """Entries valid now: not superseded, and no ``valid_to`` or one still ahead. The SQL form of the same
    test, for the hand-written reads: :data:`usermemory.sql.base.CURRENT`."""
    return Q(superseded_by__isnull=True) & (Q(valid_to__isnull=True) | Q(valid_to__gt=Now()))


def memory_readable_for(
    *, caller: Caller, user_id: str, group_ids: list[str] | None = None, include_superseded: bool = False
) -> QuerySet[MemoryEntry]:
    """The user's entries this caller may read: all for viewer and admin, the visible ones for an agent;
    only those valid now (:func:`current_q`) unless ``include_superseded``."""
    qs = MemoryEntry.objects.all() if include_superseded else MemoryEntry.objects.filter(current_q())
    if not caller.is_agent:
        return qs.filter(user_id=user_id)
    agent_id, groups = resolve_read_scope(
        caller=caller, agent_id=None, group_ids=group_ids, require_agent=True
    )
    visible = visible_q(user_id=user_id, agent_id=agent_id, group_ids=groups)
    return qs.filter(visible).annotate(visible_conflict=visible_conflict(visible & current_q()))


def memory_writable_for(
    *, caller: Caller, user_id: str, group_ids: list[str] | None = None
) -> QuerySet[MemoryEntry]:
    """The user's entries valid now that the caller may read and write: all for an admin, for an agent the
    ones an upsert of its own would write (the upsert keys, :mod:`usermemory.sql.write`): its own entries,
    and global ones (one per user and key, whoever wrote it). Another agent's self or group entry is not
    one of them. A viewer writes nothing (the services' ``caller_require_writer``)."""
    readable = memory_readable_for(caller=caller, user_id=user_id, group_ids=group_ids)
    if not caller.is_agent:
        return readable
    return readable.filter(Q(visibility=Visibility.GLOBAL) | Q(source_agent_id=caller.acting_agent_id))


ENTRY_IDS = ArrayField(BigIntegerField())


def visible_conflict(visible: Q) -> Case:
    """An agent's ``conflicted``, as :func:`usermemory.sql.base.entry_columns` writes it in SQL: the stored
    flag, while another entry of the (user, key) set that the agent sees (``visible``) holds another value.
    Dream flags a set across all agents, so the stored flag alone would reveal that a hidden entry holds
    another value than the agent's guess. The output serializer shows it in place of the stored flag."""
    # Partners by meaning name each other (dream.meaning): the other entry's list holds this one.
    this_id = Func(OuterRef("id"), template="ARRAY[%(expressions)s]::bigint[]", output_field=ENTRY_IDS)
    same_meaning = Q(key=OuterRef("key")) | Q(meaning_conflicts__contains=this_id)
    others = MemoryEntry.objects.filter(visible, same_meaning).exclude(value_text=OuterRef("value_text"))
    return Case(When(conflicted=True, then=Exists(others)), default=Value(False), output_field=BooleanField())


VALUE_OPERATORS = {"$eq": "eq", "$ne": "ne", "$gt": "gt", "$gte": "gte", "$lt": "lt", "$lte": "lte"}
MAX_VALUE_CONDITIONS = 20


def value_conditions(value_filter: Any) -> tuple[tuple[str, str, Any], ...]:
    """LangGraph's ``filter`` on the value's fields as :class:`usermemory.sql.search.Filters`' conditions:
    ``{field: value}`` (equal, as JSON) or ``{field: {"$gt": value, ...}}`` with ``$eq``, ``$ne``, ``$gt``,
    ``$gte``, ``$lt`` and ``$lte``; every condition holds."""
    if value_filter is None:
        return ()
    if not isinstance(value_filter, dict):
        raise BadRequest('filter must be a JSON object: {"field": value} or {"field": {"$gt": value}}.')
    conditions: list[tuple[str, str, Any]] = []
    for name, wanted in value_filter.items():
        if isinstance(wanted, dict) and wanted and all(op in VALUE_OPERATORS for op in wanted):
            conditions.extend((name, VALUE_OPERATORS[op], operand) for op, operand in wanted.items())
        elif isinstance(wanted, dict) and any(str(op).startswith("$") for op in wanted):
            raise BadRequest(f"filter: the operators are {', '.join(VALUE_OPERATORS)}.")
        else:
            conditions.append((name, "eq", wanted))
    if len(conditions) > MAX_VALUE_CONDITIONS:
        raise BadRequest(f"filter: at most {MAX_VALUE_CONDITIONS} conditions.")
    problem = json_problem(value_filter)
    if problem:
        raise BadRequest(f"filter: {problem}.")
    return tuple(conditions)


def memory_list(
    *,
    caller: Caller,
    user_id: str,
    group_ids: list[str] | None = None,
    include_superseded: bool = False,
    agent_id: str | None = None,
    min_confidence: float | None = None,
    filters: Filters = NO_FILTERS,
    key_patterns: list[str] | None = None,
) -> QuerySet[MemoryEntry]:
    """The user's entries the caller may read (valid now unless ``include_superseded``), newest first; with
    ``agent_id``, only those that agent owns (seed 001's ``get_agent_insights``: what it wrote that the caller
    may see); with ``min_confidence``, only entries at least that sure; with ``key_patterns``, only keys
    matching one of them (:func:`usermemory.keynames.key_pattern_regex`)."""
    qs = memory_readable_for(
        caller=caller, user_id=user_id, group_ids=group_ids, include_superseded=include_superseded
    )
    if agent_id is not None:
        qs = qs.filter(source_agent_id=agent_id)
    if min_confidence is not None:
        qs = qs.filter(confidence__gte=min_confidence)
    if filters != NO_FILTERS:
        qs = qs.filter(filters.orm())
    if key_patterns:
        qs = qs.filter(reduce(or_, (Q(key__regex=key_pattern_regex(p)) for p in key_patterns)))
    return qs.order_by(*LIST_ORDER)


def memory_by_category(
    *,
    caller: Caller,
    user_id: str,
    category: str,
    group_ids: list[str] | None = None,
    include_superseded: bool = False,
) -> QuerySet[MemoryEntry]:
    return memory_list(
        caller=caller, user_id=user_id, group_ids=group_ids, include_superseded=include_superseded
    ).filter(category=category)


def memory_as_of(
    *,
    caller: Caller,
    user_id: str,
    as_of: datetime,
    agent_id: str | None = None,
    require_agent: bool = False,
    limit: int = 1000,
    offset: int = 0,
) -> list[MemoryEntry]:
    """What was known of the user at ``as_of``, from history
    (:func:`usermemory.sql.history.entries_as_of`): the entries as they were then, newest write first,
    unsaved. An agent key (or ``agent_id`` with a viewer or admin key) sees only the values that agent could
    see when they were written."""
    if as_of > timezone.now():
        raise BadRequest("asOf must not be in the future: history answers for the past.")
    reader, _ = resolve_read_scope(
        caller=caller, agent_id=agent_id, group_ids=None, require_agent=require_agent
    )
    past = history_sql.entries_as_of(
        user_id=user_id, agent_id=reader, as_of=as_of, limit=limit, offset=offset
    )
    return [
        MemoryEntry(
            id=p.entry_id,
            user_id=user_id,
            key=p.key,
            value=p.value,
            category=p.category,
            visibility=p.visibility,
            source_agent_id=p.owner,
            group_ids=p.group_ids,
            conflicted=False,
            access_count=0,
            created_at=p.created_at,
            updated_at=p.updated_at or p.created_at,
            valid_from=p.updated_at or p.created_at,
            observed_at=p.observed_at or p.updated_at or p.created_at,
            valid_to=p.valid_to,
        )
        for p in past
    ]


# Words of a full-text query: letters and digits, as PostgreSQL's parser splits them ('_' separates words).
_WORD = re.compile(r"[^\W_]+")
FULLTEXT_CONFIG = "simple"  # the configuration of memory_fulltext_idx: the two must match


def fulltext_match(query: str) -> CombinedExpression | None:
    """Entries whose key or value text holds every word of ``query``, each as a word or a word's prefix;
    ``None`` when the query has no word. Served by ``memory_fulltext_idx`` (same vector expression).

    Each word is quoted as a tsquery lexeme (``'word':*``); a word holds only letters and digits, so no input
    can add tsquery syntax."""
    words = _WORD.findall(query.lower())
    if not words:
        return None
    vector = SearchVector("key", "value_text", config=FULLTEXT_CONFIG)
    terms = " & ".join(f"'{word}':*" for word in dict.fromkeys(words))
    tsquery = Func(
        Value(FULLTEXT_CONFIG), Value(terms), function="to_tsquery", output_field=SearchQueryField()
    )
    return CombinedExpression(vector, "@@", tsquery, output_field=BooleanField())


def memory_search(
    *,
    caller: Caller,
    user_id: str,
    query: str,
    group_ids: list[str] | None = None,
    limit: int = 1000,
    offset: int = 0,
    mode: str = "keyword",
    include_superseded: bool = False,
    min_confidence: float | None = None,
    min_score: float | None = None,
    filters: Filters = NO_FILTERS,
) -> list[MemoryEntry]:
    """One page of search results. ``keyword`` (the default, EDDI's): case-insensitive literal substring
    match on the key or the value's text, newest first. ``semantic`` and ``hybrid``: by relevance
    (:func:`memory_search_ranked`, whose scores and fallback this drops).

    One hand-written statement (:func:`usermemory.sql.search.search`); compiling the visible-entries
    query with the ORM cost several times what PostgreSQL spends running it.
    """
    if mode != "keyword":
        ranked = memory_search_ranked(
            caller=caller,
            user_id=user_id,
            query=query,
            mode=mode,
            group_ids=group_ids,
            limit=limit,
            offset=offset,
            include_superseded=include_superseded,
            min_confidence=min_confidence,
            min_score=min_score,
            filters=filters,
        )
        return [scored.entry for scored in ranked.entries]
    if not query:
        raise BadRequest("q is required: the text to search for.")
    check_query(query)
    agent_id, groups = _search_scope(caller=caller, group_ids=group_ids)
    metrics.searches.labels(mode="keyword").inc()
    return search_sql.search(
        user_id=user_id,
        agent_id=agent_id,
        group_ids=groups,
        agent_view=caller.is_agent,
        query=query,
        limit=limit,
        offset=offset,
        include_superseded=include_superseded,
        min_confidence=min_confidence,
        filters=filters,
    )


def _search_scope(*, caller: Caller, group_ids: list[str] | None) -> tuple[str | None, Groups]:
    if not caller.is_agent:
        return None, []
    return resolve_read_scope(caller=caller, agent_id=None, group_ids=group_ids, require_agent=True)


def memory_search_ranked(
    *,
    caller: Caller,
    user_id: str,
    query: str,
    mode: str,
    group_ids: list[str] | None = None,
    limit: int = 1000,
    offset: int = 0,
    include_superseded: bool = False,
    min_confidence: float | None = None,
    min_score: float | None = None,
    filters: Filters = NO_FILTERS,
) -> RankedSearch:
    """``semantic``: the entries nearest the query's meaning (cosine similarity of the current model's
    vectors). ``hybrid``: the candidates of that list and of a full-text list (the query's words, OR, stop
    words dropped, in SEARCH_LANGUAGE, ranked by BM25), scored by both. Each score is the probability of
    relevance (:mod:`usermemory.ranking`), the reranker's when one is configured; those under ``min_score``
    are left out. Candidates are only the caller's visible entries narrowed by ``filters``, in the same
    statement. When the embedder is down both answer by full text alone (``fallback``)."""
    agent_id, groups = _search_scope(caller=caller, group_ids=group_ids)
    window = limit + offset
    ranking, fallback = ranking_.search_ranking(
        query=query, mode=mode, window=window, min_score=min_score, user_id=user_id
    )
    candidates = ranking_.second_stage_window(window)
    metrics.searches.labels(mode=mode).inc()
    entries = search_sql.ranked_search(
        user_id=user_id,
        agent_id=agent_id,
        group_ids=groups,
        agent_view=caller.is_agent,
        limit=limit if candidates is None else candidates,
        offset=offset if candidates is None else 0,
        ranking=ranking if candidates is None else ranking.without_threshold(),
        include_superseded=include_superseded,
        min_confidence=min_confidence,
        filters=filters,
    )
    if candidates is None:
        return RankedSearch(entries, fallback)
    reranked, failed = ranking_.rerank(
        query=query, candidates=entries, min_score=ranking.min_score, agent_id=agent_id
    )
    return RankedSearch(
        reranked[offset : offset + limit], ranking_.fallback_of(first=fallback, unreranked=failed)
    )


def memory_search_all_users(
    *, caller: Caller, query: str, category: str | None = None
) -> QuerySet[MemoryEntry]:
    """Staff search across every user (viewer and admin keys only): full-text, every word of ``q`` as a word
    or a word's prefix (:func:`fulltext_match`)."""
    if caller.is_agent:
        raise Forbidden("Search across all users needs a viewer or admin key.")
    if not query:
        raise BadRequest("q is required: the text to search for.")
    check_query(query)
    match = fulltext_match(query)
    if match is None:
        raise BadRequest("q has no word to search for (letters or digits).")
    qs = MemoryEntry.objects.filter(match, current_q()).order_by(*LIST_ORDER)
    return qs.filter(category=category) if category else qs


def memory_by_key(
    *,
    caller: Caller,
    user_id: str,
    key: str,
    group_ids: list[str] | None = None,
    include_superseded: bool = False,
) -> MemoryEntry:
    """The entry with this key that the caller sees; its own first, then group, then global."""
    qs = memory_readable_for(
        caller=caller, user_id=user_id, group_ids=group_ids, include_superseded=include_superseded
    ).filter(key=key)
    rank = Case(
        When(
            source_agent_id=caller.agent_id, visibility__in=[Visibility.SELF, Visibility.GROUP], then=Value(0)
        ),
        When(visibility=Visibility.GROUP, then=Value(1)),
        When(visibility=Visibility.GLOBAL, then=Value(2 if caller.is_agent else -1)),
        default=Value(3),
        output_field=IntegerField(),
    )
    entry = qs.annotate(rank=rank).order_by("rank", *LIST_ORDER).first()
    if entry is None:
        raise NotFound(f"No memory with key '{key}' found for user: {user_id}")
    return entry


def memory_count(
    *, caller: Caller, user_id: str, group_ids: list[str] | None = None, include_superseded: bool = False
) -> int:
    return memory_readable_for(
        caller=caller, user_id=user_id, group_ids=group_ids, include_superseded=include_superseded
    ).count()


def entry_not_found(entry_id: int) -> NotFound:
    """The one 404 of an entry id, the same whether the entry does not exist or the caller may not read it."""
    return NotFound(f"No memory entry with id {publicids.to_public(publicids.ENTRY, entry_id)}.")


def memory_get_readable(*, caller: Caller, entry_id: int) -> MemoryEntry:
    """One entry by id, if the caller may read it (404 otherwise, so ids of hidden entries leak nothing)."""
    entry = MemoryEntry.objects.filter(id=entry_id).first()
    if entry is None or (
        caller.is_agent
        and not memory_readable_for(caller=caller, user_id=entry.user_id, include_superseded=True)
        .filter(id=entry_id)
        .exists()
    ):
        raise entry_not_found(entry_id)
    return entry


def memory_history(*, caller: Caller, entry_id: int, limit: int = 1000) -> list[MemoryEvent]:
    """The first ``limit`` events of one entry, oldest first.

    Viewer and admin keys and staff see every event. An agent reads the history of an entry it can read now,
    and in it only what it could see when each event was written: an event shows when the agent could see
    its old value or its new value (the scopes the event recorded, met by the agent's groups now), and a
    value it could not see is ``None``, with ``old_value_hidden`` / ``new_value_hidden`` set. So a ``self``
    entry re-upserted as ``group`` shows the group its new values only, and an entry moved from one group to
    another shows the second group nothing of the first.

    Dream's ``flagged`` and ``unflagged`` events are not shown to agents: Dream flags a (user, key) set
    across every agent, so such an event on an agent's own entry would tell it that an entry it cannot see
    holds another value (the leak its ``conflicted`` flag avoids, :func:`visible_conflict`).

    Key prefixes are for staff (viewer and admin keys, staff): an agent sees no ``key_prefix``, its own keys'
    included, and a change made with a viewer or admin key names only the role (:func:`_without_key_prefix`).
    """
    events = MemoryEvent.objects.filter(entry_id=entry_id).order_by("created_at", "id")
    if not caller.is_agent:
        if not events.exists() and not MemoryEntry.objects.filter(id=entry_id).exists():
            raise entry_not_found(entry_id)
        return list(events[:limit])
    memory_get_readable(caller=caller, entry_id=entry_id)
    seen = history_sql.events_seen_by_agent(
        entry_id=entry_id, agent_id=caller.acting_agent_id, skip_actions=CONFLICT_ACTIONS, limit=limit
    )
    for row in seen:  # the output serializer shows which values were hidden
        row.event.old_value_hidden = row.old_value_hidden  # type: ignore[attr-defined]  # set for the serializer only
        row.event.new_value_hidden = row.new_value_hidden  # type: ignore[attr-defined]  # set for the serializer only
        _without_key_prefix(row.event)
    return [row.event for row in seen]


def _without_key_prefix(event: MemoryEvent) -> None:
    """An event as an agent sees it, naming no key: a key's prefix picks one key out of its agent's (or an
    admin's) keys, which is for staff to know. ``actor_id`` keeps the agent, or the role of a viewer or admin
    key (its ``role:prefix``, as :class:`~usermemory.history.Actor` records it). Not saved."""
    event.key_prefix = ""
    if event.actor_type == MemoryEvent.ActorType.KEY:
        event.actor_id = event.actor_id.split(":", 1)[0]


def properties_for_user(*, caller: Caller, user_id: str) -> dict[str, object]:
    """The legacy flat map: each global entry's key and value, of the entries the caller reads elsewhere
    (:func:`memory_readable_for`: valid now, so neither past a TTL nor superseded by Dream)."""
    rows = memory_readable_for(caller=caller, user_id=user_id).filter(visibility=Visibility.GLOBAL)
    return dict(rows.order_by("key").values_list("key", "value"))
