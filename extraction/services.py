"""Memory formation (issue 28): facts about a user extracted from messages by an LLM, then added, updated or
left as they are, decided in code (:mod:`extraction.decide`), and written through usermemory's own upsert:
the same guardrails, caps, ``allowedCategories``, turn limits and history as every other write. Nothing is
ever deleted by extraction.

One extraction is one LLM call (:func:`extraction_propose`) over at most :data:`MAX_MESSAGES` messages,
then the writes (:func:`extraction_apply`), each fact in its own savepoint: a fact a guardrail refuses is
``REJECTED`` with the reason, and the others go on. The model's answer is checked against a JSON Schema
(:func:`extraction.prompts.answer_schema`: this user only, bounded keys and values, sources among the
messages sent, entry ids among those shown) and each text against the checks every door applies; an answer
that fails is refused whole and changes nothing, but is recorded and counted with its cost.

**Bounded by everything shown.** Every fact of one call is at most the narrowest scope among all the
messages the model was shown (:attr:`ExtractionRequest.bound`), not among those it says it used: a confused or
prompt-injected model can cite any message for any fact, so a private note (the agent's memory channel) in
the prompt makes every fact of that call private. The stored facts in the prompt bound it alike
(:attr:`Prepared.bound`): a model told to restate them cannot make one wider. Only the entries that every
reader of the call's facts may read are shown (:func:`_shown`), so that bound narrows nothing the caller
asked for.

Each written fact says where it came from: the entry's ``source`` is ``"extracted"`` and its ``confidence``
the model's, and its history event's ``provenance`` names the conversation and messages, the model, the
prompt version and the extraction.
"""

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from activity.budget import AgentBudget
from activity.models import LlmSpend
from apikeys.caller import Caller
from apikeys.models import Agent, ApiKey
from events.models import EventType
from events.services import event_record
from extraction import metrics
from extraction.decide import (
    ADD,
    NOOP,
    REJECTED,
    SKIPPED,
    UPDATE,
    Bound,
    Candidate,
    KeyMeaning,
    Scope,
    decide,
    visible_candidates,
)
from extraction.models import Extraction
from extraction.prompts import (
    MAX_FACT_KEY,
    MAX_KNOWN,
    PROMPT_VERSION,
    SYSTEM,
    Known,
    answer_schema,
    prompt_of,
)
from memoryplatform import publicids
from memoryplatform.errors import ServiceError
from memoryplatform.llm import LLM, LLMError, stored_cost
from memoryplatform.locks import LockId, advisory_xact_lock
from memoryplatform.text import is_blank, text_problem
from usermemory.models import DEFAULT_ALLOWED_CATEGORIES, AgentMemoryPolicy, Visibility
from usermemory.selectors import policy_for_agent
from usermemory.services import MemoryWrite, Skipped, memory_upsert, register_user_data

logger = logging.getLogger(__name__)

MAX_MESSAGES = 50
SOURCE = "extracted"
MAX_RECORDED_ERROR = 500


@dataclass(frozen=True)
class SourceMessage:
    """A message given to the model: its role and text, its id when known, and its bound (the broadest
    scope of what can be learned from it: who could read it). A stored message has its time (``observed_at``:
    when it was written, the time of the facts it gives) and its ``position`` in the conversation; a message
    a caller sends without a stored id has neither (its facts are observed when they are written)."""

    role: str
    content: str
    message_id: str | None
    bound: Bound
    observed_at: datetime | None = None
    position: int | None = None


@dataclass(frozen=True)
class ExtractionRequest:
    """One extraction as a door (or the background run) asks for it. ``scope``: where new facts go, within
    the call's :attr:`bound`; ``category``: every fact's, or ``None`` for the model's choice among the agent's
    ``allowedCategories``. ``key_prefix``: the facts' place (a LangGraph namespace's, say): each fact's key
    is put under it (one the model reuses from those shown, already under it, stays as it is), and the facts
    are compared only with the entries under it in :attr:`scope` (:meth:`in_place`), the only ones shown."""

    agent: Agent
    user_id: str
    messages: list[SourceMessage]
    scope: Scope
    category: str | None = None
    conversation_id: str | None = None
    dry_run: bool = False
    trigger: str = Extraction.Trigger.API
    turn_id: str | None = None
    key_prefix: str | None = None

    @property
    def caller(self) -> Caller:
        """The agent the facts are written as: its guardrails, caps and scope apply, whatever key asked."""
        return Caller(role=ApiKey.Role.AGENT, agent=self.agent)

    def placed(self, key: str) -> str:
        """A fact's key, put under :attr:`key_prefix`."""
        prefix = self.key_prefix or ""
        return key if key.startswith(prefix) else prefix + key

    def in_place(self, candidate: Candidate) -> bool:
        """Whether a stored entry is of the facts' place: everyone's, or, with a :attr:`key_prefix`, those
        under it in :attr:`scope` (its visibility, and for ``group`` each of its groups)."""
        if self.key_prefix is None:
            return True
        scope = self.scope
        return (
            candidate.key.startswith(self.key_prefix)
            and candidate.visibility == scope.visibility
            and set(scope.group_ids) <= set(candidate.group_ids)
        )

    @property
    def bound(self) -> Bound:
        """The bound of every fact of the call: the narrowest of all its messages' bounds, whichever the
        model cites (its sources are its say-so)."""
        return messages_bound(self.messages)


def messages_bound(messages: list[SourceMessage]) -> Bound:
    """The narrowest bound among ``messages`` (``global`` for none)."""
    bound = Bound(Visibility.GLOBAL)
    for message in messages:
        bound = bound.narrowest(message.bound)
    return bound


@dataclass
class Proposed:
    """The model's answer, checked: its facts, the call's cost, what the model was shown, and the bound of
    every fact (:attr:`Prepared.bound`)."""

    facts: list[dict[str, Any]]
    cost: float
    model: str
    candidates: list[Candidate]
    threshold: float
    bound: Bound


@dataclass
class Outcome:
    """What an extraction did: its record and one operation per proposed fact."""

    extraction: Extraction
    operations: list[dict[str, Any]] = field(default_factory=list)
    already: list[str] = field(default_factory=list)  # messages named that were extracted before: left out

    def count(self, op: str) -> int:
        return sum(1 for o in self.operations if o["op"] == op)


def _categories(policy: AgentMemoryPolicy, category: str | None) -> list[str]:
    if category is not None:
        return [category]
    return list(policy.allowed_categories or DEFAULT_ALLOWED_CATEGORIES)


def _shown(request: ExtractionRequest, candidates: list[Candidate]) -> list[Candidate]:
    """The stored facts the model may be shown: only the entries every agent that may see a fact of the
    call may see (:meth:`Bound.may_show`, under the messages' bound narrowed to where new facts go), so a
    model told to repeat what it was shown cannot make a fact wider than it was. Without a conversation the
    caller vouches for its messages (their bound is ``global``), and the scope it asks for decides: ``self``
    shows every entry the agent may read, ``global`` only global ones."""
    bound = request.bound.narrowest(Bound.of(request.scope))
    return [c for c in candidates if bound.may_show(c.scope)]


def _shown_bound(request: ExtractionRequest, shown: list[Known], candidates: list[Candidate]) -> Bound:
    """The bound of every fact of a call: the narrowest of its messages' and of the stored facts it shows."""
    scopes = {c.entry_id: c.scope for c in candidates}
    bound = request.bound
    for known in shown:
        bound = bound.narrowest(Bound.of(scopes[known.entry_id]))
    return bound


@dataclass
class Prepared:
    """A call as it will be sent (its prompt and the schema its answer must meet), and what decides each
    fact after it: the stored facts compared and the policy's threshold of meaning."""

    prompt: str
    schema: dict[str, Any]
    candidates: list[Candidate]
    threshold: float
    bound: Bound  # every fact's: the narrowest of the messages and stored facts in the prompt


def extraction_prepare(*, request: ExtractionRequest) -> Prepared:
    """The call for ``request``, built as it will be sent (each text cut as the prompt cuts it), so what it
    costs can be estimated before it is made (:meth:`memoryplatform.llm.LLM.estimate_cost`)."""
    policy = policy_for_agent(agent_id=request.agent.id)
    visible = visible_candidates(user_id=request.user_id, agent_id=request.agent.id)
    candidates = [c for c in visible if request.in_place(c)]
    known = [Known(c.entry_id, c.key, c.text) for c in _shown(request, candidates)[:MAX_KNOWN]]
    categories = _categories(policy, request.category)
    max_value = min(policy.max_value_length, settings.MEMORY_MAX_VALUE_CHARS)
    schema = answer_schema(
        user_id=request.user_id,
        messages=len(request.messages),
        known_ids=[k.entry_id for k in known],
        categories=categories,
        max_value=max_value,
    )
    schema["properties"]["facts"]["items"]["properties"]["key"]["maxLength"] = min(
        MAX_FACT_KEY, policy.max_key_length
    )
    prompt = prompt_of(
        user_id=request.user_id,
        messages=[{"role": m.role, "content": m.content} for m in request.messages],
        known=known,
        categories=categories,
    )
    bound = _shown_bound(request, known, candidates)
    return Prepared(prompt, schema, candidates, policy.semantic_contradiction_threshold, bound)


def extraction_propose(*, request: ExtractionRequest, llm: LLM, prepared: Prepared | None = None) -> Proposed:
    """Ask the model for the facts of ``request.messages`` (the call ``prepared``, else built now), paid by
    the agent's LLM budget (:mod:`activity.budget`: :class:`~activity.budget.LlmBudgetExhausted` before any
    call when it is spent); :class:`LLMError` (with the call's cost) when it fails or its answer is refused:
    not the schema, or a text no door would store."""
    call = prepared or extraction_prepare(request=request)
    spending = AgentBudget(agent_id=request.agent.id, use=LlmSpend.Use.EXTRACTION)
    done = llm.complete_json(system=SYSTEM, prompt=call.prompt, schema=call.schema, spending=spending)
    facts = []
    for fact in done.data["facts"]:
        key, value = fact["key"].strip(), fact["value"].strip()
        for name, text in (("key", key), ("value", value)):
            problem = "is blank" if is_blank(text) else text_problem(text)
            if problem:
                raise LLMError(f"the model's answer is refused: a fact's {name} {problem}", cost=done.cost)
        facts.append({**fact, "key": request.placed(key), "value": value})
    return Proposed(facts, done.cost, llm.model, call.candidates, call.threshold, call.bound)


def extraction_record_failure(
    *, request: ExtractionRequest, error: str, cost: float, model: str
) -> Extraction:
    """Record (and count) an extraction that changed nothing: the call failed or its answer was refused."""
    metrics.failures.inc()
    metrics.cost_dollars.inc(cost)
    return Extraction.objects.create(
        trigger=request.trigger,
        agent=request.agent,
        user_id=request.user_id,
        conversation_id=request.conversation_id or "",
        dry_run=request.dry_run,
        status=Extraction.Status.FAILED,
        messages=len(request.messages),
        cost=stored_cost(cost),
        model=model,
        prompt_version=PROMPT_VERSION,
        error=error[:MAX_RECORDED_ERROR],
        created_at=timezone.now(),
    )


def extraction_record_skip(*, request: ExtractionRequest, reason: str, model: str) -> Extraction:
    """Record (and count) a batch the background passed over without a call: its prompt alone would cost
    more than the agent's ``maxExtractionCostPerRun``."""
    metrics.skipped.inc()
    return Extraction.objects.create(
        trigger=request.trigger,
        agent=request.agent,
        user_id=request.user_id,
        conversation_id=request.conversation_id or "",
        status=Extraction.Status.SKIPPED,
        messages=len(request.messages),
        model=model,
        prompt_version=PROMPT_VERSION,
        error=reason[:MAX_RECORDED_ERROR],
        created_at=timezone.now(),
    )


def _fit(scope: Scope, bound: Bound) -> Scope:
    """``scope``, narrowed to ``bound`` where it is broader: the bound's groups, else ``self``."""
    if bound.allows(scope):
        return scope
    if bound.most != Visibility.SELF and bound.groups:
        return Scope(Visibility.GROUP, bound.groups)
    return Scope(Visibility.SELF)


def _provenance(request: ExtractionRequest, fact: dict[str, Any], *, model: str, extraction_id: int) -> dict:
    ids = [request.messages[i].message_id for i in fact["sources"]]
    return {
        "source": SOURCE,
        "confidence": fact["confidence"],
        "conversationId": request.conversation_id,
        "messageIds": [i for i in ids if i],
        "messageIndexes": list(fact["sources"]),
        "model": model,
        "promptVersion": PROMPT_VERSION,
        "extraction": extraction_id,
        "trigger": request.trigger,
    }


def _operation(fact: dict[str, Any], request: ExtractionRequest, **fields: Any) -> dict[str, Any]:
    ids = [request.messages[i].message_id for i in fact["sources"]]
    return {
        "key": fact["key"],
        "value": fact["value"],
        "category": fact["category"],
        "confidence": fact["confidence"],
        "sources": [i if i else index for i, index in zip(ids, fact["sources"], strict=True)],
        "entryId": None,
        **fields,
    }


def _fact_time(request: ExtractionRequest, fact: dict[str, Any]) -> datetime | None:
    """When what a fact says was observed: the newest of the messages it cites; ``None`` (its write's time)
    when one of them has no stored time (a caller's message sent without a stored id)."""
    times = [request.messages[i].observed_at for i in fact["sources"]]
    return None if any(t is None for t in times) else max(t for t in times if t is not None)


def _skipped(fact_time: datetime, stored_time: datetime) -> dict[str, Any]:
    """A SKIPPED operation's fields: why, and both times."""
    reason = Skipped(observed_at=fact_time, stored_observed_at=stored_time).reason
    return {"op": SKIPPED, "reason": reason, **_times(fact_time, stored_time)}


def _iso(time: datetime) -> str:
    """A time as the answers write one: ISO 8601 in UTC, with a Z."""
    return time.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _times(observed: datetime | None, stored: datetime | None = None) -> dict[str, Any]:
    times = {"observedAt": _iso(observed) if observed else None}
    return times | ({"storedObservedAt": _iso(stored)} if stored else {})


def _apply_fact(
    *, request: ExtractionRequest, proposed: Proposed, fact: dict[str, Any], meaning: KeyMeaning, run_id: int
) -> dict[str, Any]:
    """Decide one fact and (unless a dry run) write it; the operation as the answer shows it."""
    bound = proposed.bound
    decision = decide(
        key=fact["key"],
        value=fact["value"],
        scope=_fit(request.scope, bound),
        bound=bound,
        agent_id=request.agent.id,
        candidates=proposed.candidates,
        meaning=meaning,
    )
    target = decision.target
    shown: dict[str, Any] = {"matchedBy": decision.matched_by} if decision.matched_by else {}
    if target is not None:
        shown["entryId"] = target.entry_id
    fact_time = _fact_time(request, fact)
    if decision.op == UPDATE and target is not None:
        if request.dry_run and target.observed_at and fact_time and target.observed_at > fact_time:
            return _operation(fact, request, **shown, **_skipped(fact_time, target.observed_at))  # as written
        shown["previousValue"] = target.value
    if decision.op == NOOP or request.dry_run or decision.scope is None:  # ADD and UPDATE carry a scope
        return _operation(fact, request, op=decision.op, **shown)
    write = MemoryWrite(
        user_id=request.user_id,
        key=decision.key,
        value=fact["value"],
        category=fact["category"],
        visibility=decision.scope.visibility,
        group_ids=list(decision.scope.group_ids) or None,
        source_conversation_id=request.conversation_id,
        confidence=fact["confidence"],
        source=SOURCE,
        provenance=_provenance(request, fact, model=proposed.model, extraction_id=run_id),
        observed_at=fact_time,
    )
    try:
        result = memory_upsert(caller=request.caller, write=write, turn_id=request.turn_id)
    except ServiceError as exc:
        return _operation(fact, request, op=REJECTED, reason=exc.message)
    entry = result.entry
    if result.skipped is not None:  # time order: the stored value was observed after the fact's message
        skipped = result.skipped
        shown = {k: v for k, v in shown.items() if k != "previousValue"} | {"entryId": entry.id}
        return _operation(fact, request, **shown, **_skipped(skipped.observed_at, skipped.stored_observed_at))
    op = ADD if result.created else UPDATE
    written = {"entryId": entry.id, "visibility": entry.visibility, "groupIds": entry.group_ids}
    return _operation(fact, request, op=op, **{**shown, **written}, **_times(entry.observed_at))


def extraction_apply(*, request: ExtractionRequest, proposed: Proposed) -> Outcome:
    """Record the extraction and apply each fact (each write in its own savepoint). Call it inside the
    transaction that must hold the writes (the background's watermark is advanced in the same one)."""
    now = timezone.now()
    extraction = Extraction.objects.create(
        trigger=request.trigger,
        agent=request.agent,
        user_id=request.user_id,
        conversation_id=request.conversation_id or "",
        dry_run=request.dry_run,
        status=Extraction.Status.SUCCEEDED,
        messages=len(request.messages),
        cost=stored_cost(proposed.cost),
        model=proposed.model,
        prompt_version=PROMPT_VERSION,
        created_at=now,
    )
    meaning = KeyMeaning(
        {f["key"] for f in proposed.facts} | {c.key for c in proposed.candidates},
        threshold=proposed.threshold,
    )
    outcome = Outcome(extraction)
    seen: set[str] = set()
    for fact in proposed.facts:
        if fact["key"] in seen:
            outcome.operations.append(_operation(fact, request, op=REJECTED, reason="a key given twice"))
            continue
        seen.add(fact["key"])
        outcome.operations.append(
            _apply_fact(request=request, proposed=proposed, fact=fact, meaning=meaning, run_id=extraction.pk)
        )
    extraction.facts_added = outcome.count(ADD)
    extraction.facts_updated = outcome.count(UPDATE)
    extraction.facts_unchanged = outcome.count(NOOP)
    extraction.facts_rejected = outcome.count(REJECTED)
    extraction.facts_skipped = outcome.count(SKIPPED)
    extraction.proposals = outcome.operations
    counts = ["facts_added", "facts_updated", "facts_unchanged", "facts_rejected", "facts_skipped"]
    extraction.save(update_fields=[*counts, "proposals"])
    if not request.dry_run and extraction.facts_added + extraction.facts_updated:
        _report_written(request, extraction)
    metrics.cost_dollars.inc(proposed.cost)
    if not request.dry_run:
        for op in (ADD, UPDATE, NOOP, REJECTED, SKIPPED):
            metrics.facts.labels(op=op.lower()).inc(outcome.count(op))
    return outcome


def _report_written(request: ExtractionRequest, extraction: Extraction) -> None:
    """The ``extraction.wrote`` event, in the writes' transaction: seen by the extracting agent (its facts'
    own events say who else may see each value)."""
    event_record(
        type=EventType.EXTRACTION_WROTE,
        user_id=request.user_id,
        owner=request.agent.id,
        visibility=Visibility.SELF,
        data={
            "extractionId": publicids.public_str(publicids.EXTRACTION, extraction.pk),
            "agentId": request.agent.id,
            "conversationId": request.conversation_id or None,
            "added": extraction.facts_added,
            "updated": extraction.facts_updated,
        },
    )


def lock_user_first(user_id: str) -> None:
    """The user's lock, which every write to the user's memories holds until commit, taken before the
    transaction's first write: its id (events' ``txid``) then comes after every earlier write's to that user,
    so the change feed gives the user's events in the order they were made (:mod:`events.store`)."""
    advisory_xact_lock(LockId.USER_MEMORY, user_id)


def extraction_run(
    *, request: ExtractionRequest, llm: LLM, before_writes: Callable[[], None] | None = None
) -> Outcome:
    """One extraction, end to end: the call (outside any transaction), then the writes in one, which first
    runs ``before_writes`` (the door claims the stored messages it read: :func:`extraction.stored.claim`).
    A failed call or a refused answer is recorded and counted, and re-raised as :class:`LLMError`; a
    refusal of ``before_writes`` is recorded with the call's cost, and re-raised (nothing is written)."""
    try:
        proposed = extraction_propose(request=request, llm=llm)
    except LLMError as exc:
        extraction_record_failure(request=request, error=str(exc), cost=exc.cost, model=llm.model)
        raise
    try:
        with transaction.atomic():
            lock_user_first(request.user_id)
            if before_writes is not None:
                before_writes()
            return extraction_apply(request=request, proposed=proposed)
    except ServiceError as exc:
        extraction_record_failure(request=request, error=exc.message, cost=proposed.cost, model=llm.model)
        raise


# --- GDPR ---------------------------------------------------------------------------------------------


def extraction_erase_user(user_id: str) -> dict[str, int]:
    """Delete the user's extraction records (their proposals hold the user's facts)."""
    deleted, _ = Extraction.objects.filter(user_id=user_id).delete()
    return {"extractionsDeleted": deleted}


def extraction_export_user(user_id: str) -> dict[str, Any]:
    rows = Extraction.objects.filter(user_id=user_id).order_by("created_at", "id")
    return {
        "extractions": [
            {
                "agentId": r.agent_id,
                "conversationId": r.conversation_id or None,
                "createdAt": r.created_at.isoformat(),
                "status": r.status,
                "model": r.model,
                "promptVersion": r.prompt_version,
                "proposals": [
                    {**p, "entryId": publicids.public_str(publicids.ENTRY, p.get("entryId"))}
                    for p in r.proposals
                ],
            }
            for r in rows
        ]
    }


def register_extraction_user_data() -> None:
    register_user_data("extraction", eraser=extraction_erase_user, exporter=extraction_export_user)
