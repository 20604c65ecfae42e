"""Dream's summaries (issue 20): an LLM turns a group of a user's entries into at most a few summary entries,
and the originals are superseded, never deleted.

A policy with ``summarizeInteractions`` groups the current entries in its scope (its own, or every agent's
with ``crossAgentMaintenance``) by user, owner, visibility, groups and ``summarizeGroupBy`` (the category or
the key's prefix), so that a summary is seen by exactly the agents that saw its sources. Within such a scope,
only facts that are related go together (issue 56: a summary consolidates, never buries):

- only entries whose key is opaque or numbered (``memories/1``, ``mem0:<id>``, a uuid:
  :func:`usermemory.keynames.key_carries_meaning` is false). A fact an agent addresses by a descriptive key
  (``home_city``, ``trip.hotel``) stays readable by that key: it is never superseded by a summary;
- never an entry in conflict: flagged, with a partner by meaning, or in a (user, key) set that disagrees (the
  contradiction pass runs before this one, so a dry run and a real cycle find the same contradictions);
- by meaning: the entries' own vectors (of ``"key: value"``, the embedder's) at least
  :data:`RELATED_MIN_SIMILARITY` alike, every pair of a group (complete linkage, so no chain of neighbours
  joins unrelated facts). An entry without a vector waits for the next cycle; without an embedder nothing is
  summarised.

A set of at least ``summarizeMinEntries`` related entries goes to the LLM, which answers with at most
``summarizeTargetEntries`` summaries, each naming the entries it replaces (a JSON Schema checks the answer,
ids included), and whose texts pass the checks every door applies to input (no NUL, no lone surrogate, no
blank key or value).

Two steps, so that dry runs and staff approval show exactly what a real cycle writes:
:func:`propose` asks the LLM and returns a :class:`Proposal` (plain JSON, kept in the run's ``details``);
:func:`apply_proposal` writes it through usermemory's ``memory_supersede``, in one transaction: the
summaries (provenance: source entries, agents, model, cost, run), a ``superseded`` event per original, and
``supersededBy``/``validTo`` on the originals. A proposal whose sources changed since it was made is skipped
whole. Nothing is ever half applied.

A cycle sends an entry at most once, whatever number of policies reach it, and makes at most the policy's
``maxLlmCallsPerRun`` calls in all and ``maxLlmCallsPerUser`` about one user (:mod:`dream.records`). A bad
answer, or a write that fails, fails its own group only: it is counted, and the next group goes on.
"""

import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import DatabaseError, transaction
from django.db.models import Count, F, Func, QuerySet, Value
from django.db.models.fields import CharField

from activity.budget import AgentBudget, LlmBudgetExhausted
from activity.models import LlmSpend
from dream import metrics
from dream.models import DreamPolicy, DreamRun
from dream.records import LlmCalls, error_text, record_failure
from dream.selectors import dream_set_disagrees
from dream.store import entry_pairs_alike
from memoryplatform import publicids
from memoryplatform.embeddings import get_embedder
from memoryplatform.llm import LLM, LLMError, build_llm
from memoryplatform.logsafe import user_ref
from memoryplatform.text import text_problem
from usermemory.history import Actor, Scope
from usermemory.keynames import key_carries_meaning
from usermemory.maintenance import Replacement, memory_supersede
from usermemory.models import MemoryEntry, MemoryEvent, SummarizeGroupBy
from usermemory.searchtext import value_as_text
from usermemory.selectors import current_q

logger = logging.getLogger(__name__)

# The entries of one group sent in one call (the oldest first); a larger group is summarised over cycles.
MAX_ENTRIES_PER_CALL = 100
# The entries of one scope read per cycle to find related sets in (the oldest first).
MAX_ENTRIES_READ = 500
# Two entries are related from this cosine similarity of their vectors. On the local model (multilingual-e5
# small) unrelated facts of one user reach 0.92, and one fact said again in other words 0.94 to 0.96 (issue
# 56; bench.dream_recall measures recall after a cycle). Another embedder whose cosines run lower relates
# fewer entries: summaries then consolidate less, never bury more.
RELATED_MIN_SIMILARITY = 0.93
MAX_SUMMARY_KEY = 100
MAX_SUMMARY_VALUE = 4000
# The key a summary gets when its own is taken: "<key> (dream <first source's public id>)". A source is
# superseded once, so no two summaries ever get the same one; the LLM may not answer a key of that shape (nor
# of the shape before public ids, "<key> (dream <run>.<first source's row id>)"). Agents read the key, so it
# names no row number (issue 44, finding 10).
FALLBACK_KEY = re.compile(r"\(dream [\d.]+\)$")
SYSTEM = (
    "You consolidate stored facts about one user into fewer, complete summary facts for an AI assistant's "
    "memory. Keep every fact that is still true; merge duplicates; never invent anything. Each summary "
    "names, in sources, the ids of the entries it replaces; an entry appears in at most one summary, and an "
    "entry you leave out stays as it is. Answer with one JSON object and nothing else: "
    '{"summaries": [{"key": "<short key>", "value": "<the summary text>", "sources": [<entry id>, ...]}]}'
)


@dataclass
class Proposal:
    """What one group would become: its scope, its sources as they were read, and the LLM's summaries."""

    user_id: str
    owner: str | None
    visibility: str
    group_ids: list[str]
    label: str
    category: str
    sources: dict[int, dict[str, Any]]  # id -> {key, value, agent, updatedAt}
    summaries: list[dict[str, Any]] = field(default_factory=list)  # {key, value, sources}
    model: str = ""
    cost: float = 0.0

    def as_json(self) -> dict[str, Any]:
        return {
            "userId": self.user_id,
            "ownerAgentId": self.owner,
            "visibility": self.visibility,
            "groupIds": self.group_ids,
            "label": self.label,
            "category": self.category,
            "sources": {str(k): v for k, v in self.sources.items()},
            "summaries": self.summaries,
            "model": self.model,
            "cost": self.cost,
        }

    @classmethod
    def of_json(cls, data: dict[str, Any]) -> "Proposal":
        return cls(
            user_id=data["userId"],
            owner=data["ownerAgentId"],
            visibility=data["visibility"],
            group_ids=data["groupIds"],
            label=data["label"],
            category=data["category"],
            sources={int(k): v for k, v in data["sources"].items()},
            summaries=data["summaries"],
            model=data["model"],
            cost=data["cost"],
        )


def _label(group_by: str) -> Func | F:
    """What entries are grouped by besides their scope: the category, or the key's part before its first
    '.', ':' or '/' (the whole key when it has none)."""
    if group_by == SummarizeGroupBy.KEY_PREFIX:
        return Func(
            F("key"), Value("[.:/].*$"), Value(""), function="regexp_replace", output_field=CharField()
        )
    return F("category")


def _candidates(policy: DreamPolicy, sent: set[int]) -> QuerySet[MemoryEntry]:
    """The entries a policy may summarise: current, not themselves summaries, in no conflict (flagged, with
    a partner by meaning, or in a (user, key) set that disagrees), its own unless cross-agent, and not
    ``sent`` to the LLM already this cycle (nor held back by the cycle)."""
    qs = MemoryEntry.objects.filter(
        current_q(), provenance__isnull=True, conflicted=False, meaning_conflicts=[]
    ).exclude(dream_set_disagrees())
    if not policy.cross_agent_maintenance:
        qs = qs.filter(source_agent_id=policy.agent_id)
    if sent:
        qs = qs.exclude(id__in=sorted(sent))
    return qs.annotate(label=_label(policy.summarize_group_by))


def related_sets(*, entries: list[MemoryEntry], model: str, min_size: int) -> list[list[MemoryEntry]]:
    """The sets of at least ``min_size`` of these entries (in their order) every two of which are related
    (:data:`RELATED_MIN_SIMILARITY`), each of at most :data:`MAX_ENTRIES_PER_CALL`: an entry joins the first
    set all of whose entries it is related to, else starts one."""
    pairs = entry_pairs_alike(ids=[e.id for e in entries], model=model, min_similarity=RELATED_MIN_SIMILARITY)
    related = {pair for first, second in pairs for pair in ((first, second), (second, first))}
    sets: list[list[MemoryEntry]] = []
    for entry in entries:
        home = next(
            (
                found
                for found in sets
                if len(found) < MAX_ENTRIES_PER_CALL and all((entry.id, e.id) in related for e in found)
            ),
            None,
        )
        if home is None:
            sets.append([entry])
        else:
            home.append(entry)
    return [found for found in sets if len(found) >= min_size]


def _proposal(group: dict[str, Any], entries: list[MemoryEntry]) -> Proposal:
    return Proposal(
        user_id=group["user_id"],
        owner=group["source_agent_id"],
        visibility=group["visibility"],
        group_ids=group["group_ids"],
        label=group["label"],
        category=entries[0].category,
        sources={
            e.id: {
                "key": e.key,
                "value": e.value,
                "agent": e.source_agent_id,
                "updatedAt": e.updated_at.isoformat(),
            }
            for e in entries
        },
    )


def find_groups(
    *, policy: DreamPolicy, sent: set[int] | None = None, held: frozenset[int] = frozenset()
) -> Iterator[Proposal]:
    """The sets of at least ``summarizeMinEntries`` related entries with opaque keys, none of which is in
    ``sent`` or ``held``, as proposals with their sources and no summaries yet, by user and label. Each
    scope's entries are read when it is reached, so a caller that stops early reads no more."""
    embedder = get_embedder()
    if embedder is None:
        return
    sent = set(sent or ()) | held
    min_size = max(policy.summarize_min_entries, 2)
    scope = ("user_id", "source_agent_id", "visibility", "group_ids", "label")
    groups = list(
        _candidates(policy, sent)
        .values(*scope)
        .annotate(n=Count("id"))
        .filter(n__gte=min_size)
        .order_by("user_id", "label", "source_agent_id", "visibility")
    )
    for group in groups:
        read = (
            _candidates(policy, sent)
            .filter(**{name: group[name] for name in scope})
            .order_by("updated_at", "id")[:MAX_ENTRIES_READ]
        )
        opaque = [e for e in read if not key_carries_meaning(e.key)]
        for entries in related_sets(entries=opaque, model=embedder.model_id, min_size=min_size):
            yield _proposal(group, entries)


def prompt_of(proposal: Proposal, *, target: int) -> str:
    lines = [
        f"[{entry_id}] {source['key']}: {value_as_text(source['value'])}"
        for entry_id, source in proposal.sources.items()
    ]
    return (
        f"These {len(lines)} entries about one user share the {proposal.label!r} group. Replace them with at "
        f"most {target} summaries.\n\n" + "\n".join(lines)
    )


def answer_schema(*, ids: list[int], target: int) -> dict[str, Any]:
    return {
        "type": "object",
        "required": ["summaries"],
        "properties": {
            "summaries": {
                "type": "array",
                "minItems": 1,
                "maxItems": target,
                "items": {
                    "type": "object",
                    "required": ["key", "value", "sources"],
                    "properties": {
                        "key": {"type": "string", "minLength": 1, "maxLength": MAX_SUMMARY_KEY},
                        "value": {"type": "string", "minLength": 1, "maxLength": MAX_SUMMARY_VALUE},
                        "sources": {
                            "type": "array",
                            "minItems": 1,
                            "uniqueItems": True,
                            "items": {"enum": ids},
                        },
                    },
                },
            }
        },
    }


def summary_problem(*, key: str, value: str) -> str | None:
    """Why a summary (its key and value, stripped) cannot be stored, as the API would refuse the same text
    (:mod:`memoryplatform.text`), or ``None``. The schema bounds the lengths."""
    if not key or not value:
        return "a summary's key or value is blank"
    for name, text in (("key", key), ("value", value)):
        problem = text_problem(text)
        if problem:
            return f"a summary's {name} {problem}"
    if FALLBACK_KEY.search(key):
        return "a summary's key ends like Dream's own fallback keys"
    return None


def propose(*, proposal: Proposal, llm: LLM, target: int, agent_id: str) -> Proposal:
    """Ask the LLM for the group's summaries, paid by ``agent_id``'s LLM budget (:mod:`activity.budget`:
    :class:`~activity.budget.LlmBudgetExhausted` before the call when it is spent); :class:`LLMError` (with
    the call's cost) when its answer is missing, malformed, names an entry twice, or holds a text that
    cannot be stored (:func:`summary_problem`)."""
    done = llm.complete_json(
        system=SYSTEM,
        prompt=prompt_of(proposal, target=target),
        schema=answer_schema(ids=list(proposal.sources), target=target),
        spending=AgentBudget(agent_id=agent_id, use=LlmSpend.Use.SUMMARY),
    )
    summaries = done.data["summaries"]
    named = [entry_id for summary in summaries for entry_id in summary["sources"]]
    if len(named) != len(set(named)):
        raise LLMError("the model's answer puts an entry in two summaries", cost=done.cost)
    proposal.summaries = [
        {"key": s["key"].strip(), "value": s["value"].strip(), "sources": sorted(s["sources"])}
        for s in summaries
    ]
    for summary in proposal.summaries:
        problem = summary_problem(key=summary["key"], value=summary["value"])
        if problem:
            raise LLMError(f"the model's answer is refused: {problem}", cost=done.cost)
    proposal.model = llm.model
    proposal.cost = done.cost
    return proposal


def estimate(*, proposal: Proposal, llm: LLM, target: int) -> float:
    """The cost of the group's call, from its prompt (before sending it)."""
    return llm.estimate_cost(system=SYSTEM, prompt=prompt_of(proposal, target=target))


def fallback_key(key: str, *, first_source: int) -> str:
    """The key of a summary whose own is taken (:data:`FALLBACK_KEY`): unique, since a source is superseded
    once, and naming the source by its public id."""
    return f"{key[:MAX_SUMMARY_KEY]} (dream {publicids.to_public(publicids.ENTRY, first_source)})"


def apply_proposal(*, proposal: Proposal, run_id: int, preserve_agents: bool) -> int:
    """Write the proposal's summaries and supersede their sources, in one transaction under the user's lock
    (:func:`usermemory.maintenance.memory_supersede`). Returns how many entries it superseded: 0 when any
    source changed (or went) since the proposal was made, in which case nothing is written."""
    replacements = [
        Replacement(
            key=summary["key"],
            key_if_taken=fallback_key(summary["key"], first_source=summary["sources"][0]),
            text=summary["value"],
            sources=summary["sources"],
            provenance={
                "writtenBy": "dream",
                "run": run_id,
                "sourceEntries": summary["sources"],
                "model": proposal.model,
                "cost": proposal.cost / len(proposal.summaries),
            },
        )
        for summary in proposal.summaries
    ]
    superseded = memory_supersede(
        user_id=proposal.user_id,
        scope=Scope(proposal.visibility, proposal.owner, proposal.group_ids),
        category=proposal.category,
        replacements=replacements,
        sources_read={i: datetime.fromisoformat(s["updatedAt"]) for i, s in proposal.sources.items()},
        actor=Actor(MemoryEvent.ActorType.DREAM, f"run:{run_id}"),
        record_agents=preserve_agents,
    )
    if not superseded:
        logger.info(
            "Dream run #%s: a group of %s changed since its proposal; skipped",
            run_id,
            user_ref(proposal.user_id),
        )
        return 0
    metrics.entries_summarized.inc(superseded)
    return superseded


@dataclass
class SummaryTotals:
    """What the summaries of one cycle did (a run's counts and its ``details["summaries"]``), and the
    cycle's LLM calls (``calls``, shared with the confirmation of contradictions by meaning)."""

    cost: float = 0.0
    summarized: int = 0
    written: int = 0
    failures: int = 0
    proposals: list[dict[str, Any]] = field(default_factory=list)
    failed: list[dict[str, Any]] = field(default_factory=list)  # the first few (dream.records)
    capped: list[str] = field(default_factory=list)  # agents whose summaries stopped at maxCostPerRun
    out_of_budget: list[str] = field(default_factory=list)  # agents whose LLM budget stopped their summaries
    calls: LlmCalls = field(default_factory=LlmCalls)

    def details(self) -> dict[str, Any]:
        return {
            "proposals": self.proposals,
            "failures": self.failed,
            "failureCount": self.failures,
            "stoppedByCostCap": self.capped,
            "stoppedByLlmBudget": self.out_of_budget,
        }

    def fail(self, *, policy: DreamPolicy, proposal: Proposal, error: str, run_id: int) -> None:
        """Count a group's failure (a bad answer, or a write that failed) and keep the first few."""
        metrics.summarization_failed.inc()
        self.failures += 1
        record_failure(
            self.failed,
            {"agentId": policy.agent_id, "userId": proposal.user_id, "label": proposal.label, "error": error},
        )
        # The error and the label stay in the run's details (staff): the log names neither, nor the user.
        logger.warning(
            "Dream run #%s: a summary of %s's for %s failed",
            run_id,
            policy.agent_id,
            user_ref(proposal.user_id),
        )


# What a cycle does with a proposal: write it now, keep it to show (a dry run), or keep it for approval.
WRITE, DRY_RUN, APPROVAL = "write", "dry_run", "approval"


def apply_safely(*, proposal: Proposal, run_id: int, preserve_agents: bool) -> tuple[int, str]:
    """:func:`apply_proposal`, with a database error (its transaction rolled back) as a failure of this
    proposal alone: (entries superseded, the error's text without values, or "")."""
    try:
        return apply_proposal(proposal=proposal, run_id=run_id, preserve_agents=preserve_agents), ""
    except DatabaseError as exc:
        return 0, error_text(exc)


def _keep(*, policy: DreamPolicy, proposal: Proposal, run_id: int, totals: SummaryTotals, mode: str) -> None:
    """Keep a proposal the LLM made: write it now (:data:`WRITE`), or keep it to show or to approve."""
    data = proposal.as_json()
    data["agentId"] = policy.agent_id
    data["preserveAgentProvenance"] = policy.preserve_agent_provenance
    data["pending"] = mode == APPROVAL
    if mode == WRITE:
        superseded, error = apply_safely(
            proposal=proposal, run_id=run_id, preserve_agents=policy.preserve_agent_provenance
        )
        data["applied"] = bool(superseded)
        if error:
            totals.fail(policy=policy, proposal=proposal, error=error, run_id=run_id)
            return
        if superseded:
            totals.summarized += superseded
            totals.written += len(proposal.summaries)
    else:
        totals.summarized += sum(len(s["sources"]) for s in proposal.summaries)
        totals.written += len(proposal.summaries)
    totals.proposals.append(data)


def summarize_policy(
    *,
    policy: DreamPolicy,
    llm: LLM,
    run_id: int,
    totals: SummaryTotals,
    mode: str,
    held: frozenset[int] = frozenset(),
    spent: float = 0.0,
) -> None:
    """Summarise the policy's groups, one LLM call each, until the next call's estimated prompt cost would
    take the policy's spending this cycle past ``maxCostPerRun``, the agent's LLM budget refuses it
    (:mod:`activity.budget`), or the cycle has made ``maxLlmCallsPerRun`` calls. A group whose user had
    ``maxLlmCallsPerUser`` calls this cycle waits for the next one. Each proposal is kept in
    ``totals.proposals``; ``mode`` :data:`WRITE` applies it now, :data:`APPROVAL` marks it ``pending`` (for
    :func:`approve_run`), :data:`DRY_RUN` only shows it. A failed call or write changes nothing: it is
    counted, logged and (the first few) kept with the run, and the next group goes on. ``spent``: what the
    cycle spent before (the confirmation of contradictions by meaning); ``held``: entries left out."""
    cap = float(policy.max_cost_per_run)
    target = max(1, policy.summarize_target_entries)
    calls = totals.calls
    per_run, per_user = policy.max_llm_calls_per_run, policy.max_llm_calls_per_user
    for proposal in find_groups(policy=policy, sent=calls.sent, held=held):
        if calls.run_cap_reached(per_run=per_run):
            calls.stopped.append(f"summaries:{policy.agent_id}")
            logger.info("Dream run #%s: %s's summaries stop at maxLlmCallsPerRun", run_id, policy.agent_id)
            return
        if spent + estimate(proposal=proposal, llm=llm, target=target) > cap:
            totals.capped.append(policy.agent_id)
            logger.info(
                "Dream run #%s: %s's summaries stop at maxCostPerRun $%s", run_id, policy.agent_id, cap
            )
            return
        if not calls.take(user_id=proposal.user_id, per_run=per_run, per_user=per_user):
            continue  # the user had their calls this cycle
        calls.sent.update(proposal.sources)
        try:
            propose(proposal=proposal, llm=llm, target=target, agent_id=policy.agent_id)
        except LlmBudgetExhausted as exc:
            calls.give_back(user_id=proposal.user_id, entries=proposal.sources)
            totals.out_of_budget.append(policy.agent_id)
            logger.info("Dream run #%s: %s", run_id, exc.message)
            return
        except LLMError as exc:
            spent += exc.cost
            totals.cost += exc.cost
            metrics.llm_cost_dollars.inc(exc.cost)
            totals.fail(policy=policy, proposal=proposal, error=str(exc), run_id=run_id)
            continue
        spent += proposal.cost
        totals.cost += proposal.cost
        metrics.llm_cost_dollars.inc(proposal.cost)
        _keep(policy=policy, proposal=proposal, run_id=run_id, totals=totals, mode=mode)


def dream_summarize(
    *,
    run: DreamRun,
    policies: list[DreamPolicy],
    totals: SummaryTotals,
    details: dict[str, Any],
    dry_run: bool,
    held: frozenset[int] = frozenset(),
) -> None:
    """The summaries of the policies that ask for them, with the LLM the settings describe: written now,
    shown (``dry_run``), or kept for approval (``run.approval`` becomes pending). Without an LLM, or with
    wrong settings, the run says so (in ``totals`` or ``details``) and the cycle goes on. ``held``: entries
    no summary may take (those a dry run's contradiction pass would have flagged)."""
    try:
        llm = build_llm()
    except LLMError as exc:
        totals.failures += 1
        record_failure(totals.failed, {"error": f"LLM settings: {exc}"})
        metrics.summarization_failed.inc()
        return
    if llm is None:
        details["summariesSkipped"] = "summarizeInteractions is on, but LLM_PROVIDER is empty."
        return
    confirmed = totals.cost  # the confirmation of contradictions by meaning, which ran before
    for policy in policies:
        if dry_run:
            mode = DRY_RUN
        elif policy.summarize_requires_approval:
            mode = APPROVAL
        else:
            mode = WRITE
        summarize_policy(
            policy=policy, llm=llm, run_id=run.pk, totals=totals, mode=mode, held=held, spent=confirmed
        )
    if any(p.get("pending") for p in totals.proposals):
        run.approval = DreamRun.Approval.PENDING


def _identity(proposal: dict[str, Any]) -> tuple[str, ...]:
    """A proposal in a run's details, told apart from the others by its sources (each in one proposal)."""
    return tuple(sorted(proposal["sources"]))


def approve_run(*, run_id: int, approve: bool) -> int:
    """Staff's decision on a run whose summaries wait for approval: apply each proposal (skipping those
    whose sources changed since, or whose write fails) or drop them all. Returns how many entries were
    superseded. A run that is not pending (decided already, or never waiting) changes nothing: the row lock
    and the status check make a second decision a no-op. The outcome is written onto the proposals the run
    holds then (a GDPR erasure may have removed some meanwhile: they stay removed)."""
    with transaction.atomic():
        run = (
            DreamRun.objects.select_for_update().filter(pk=run_id, approval=DreamRun.Approval.PENDING).first()
        )
        if run is None:
            return 0
        run.approval = DreamRun.Approval.APPROVED if approve else DreamRun.Approval.REJECTED
        run.save(update_fields=["approval"])
        waiting = [
            data for data in run.details.get("summaries", {}).get("proposals", []) if data.get("pending")
        ]
    if not approve:
        return 0
    outcome: dict[tuple[str, ...], tuple[int, str]] = {}
    for data in waiting:
        outcome[_identity(data)] = apply_safely(
            proposal=Proposal.of_json(data), run_id=run_id, preserve_agents=data["preserveAgentProvenance"]
        )
    superseded = sum(done for done, _ in outcome.values())
    with transaction.atomic():
        run = DreamRun.objects.select_for_update().get(pk=run_id)
        proposals = list(run.details.get("summaries", {}).get("proposals", []))
        written = 0
        for data in proposals:
            if _identity(data) in outcome:
                done, error = outcome[_identity(data)]
                data.update(pending=False, applied=bool(done), **({"error": error} if error else {}))
                written += len(data["summaries"]) if done else 0
        details = {**run.details, "summaries": {**run.details.get("summaries", {}), "proposals": proposals}}
        DreamRun.objects.filter(pk=run_id).update(
            entries_summarized=superseded, summaries_written=written, details=details
        )
    return superseded
