"""Background extraction (issue 28): facts from the stored conversations of the agents whose policy says
``extractFromConversations``, run every ``EXTRACTION_INTERVAL`` seconds by a Celery worker
(``extraction.run_background``, extraction/tasks.py; beat's ``extraction-background`` schedule).

For each such agent, each conversation it takes part in (one it may read and has written in), the messages
it may read past its watermark (:class:`extraction.models.ExtractionWatermark`) are read in batches of
``batch_size``, in sequence order: the history channel as the agent sees it (every user message, its own
replies), the case log, and its own memory channel. One batch is one extraction (:mod:`extraction.services`).

- **Once, and never skipped.** The model is called outside any transaction; then, in one transaction, the
  watermark is advanced by compare-and-set (from the value read to the batch's last message) and the facts
  are written. A crash before the commit leaves both as they were: the batch is read again. A second worker
  that read the same watermark loses the compare-and-set and writes nothing.
- **Once, whichever door.** Messages the extract door extracted for the agent are covered
  (:mod:`extraction.stored`): the door moves the watermark past them where it can, and the run leaves out
  those past it; a batch one of whose messages the door claimed while the model answered is dropped at the
  commit, and read again without it.
- **In time order.** Each fact is observed at its message's time: one older than the value stored on its
  key is not written (``SKIPPED``, :mod:`extraction.services`), so re-reading an old conversation never
  writes over what a later message, an import or staff said.
- **Bounded by the messages.** A fact from a group conversation is at most ``group`` of that group; from a
  conversation without a group, the policy's ``extractionVisibility`` (``self`` by default); from the
  agent's memory channel, ``self``. Every fact of a call is bounded by all the messages it was shown, not
  by those the model cites (:attr:`extraction.services.ExtractionRequest.bound`), so the memory channel
  goes to the model in batches of its own: a batch ends where the messages pass from the memory channel to
  the others or back, and a private note never narrows (nor widens) the facts of the history.
- **Under a budget.** Before each call the cost of its prompt, as it will be sent (each message cut as the
  prompt cuts it), is estimated and checked against what is left of ``maxExtractionCostPerRun`` for the
  agent; the spending is the provider's usage. A batch whose prompt alone costs more than the cap can never
  be sent: it is read again with half its messages, down to one, and a single message still over the cap
  is passed over (the watermark moves past it and a ``skipped`` extraction records why; the run counts it
  in ``skippedBatches``), so one huge message cannot stop the agent run after run. A cap of 0 makes no call.
  The agent's LLM budget over its window (:mod:`activity.budget`) stops it too (``stoppedByLlmBudget``).
  A failed call changes nothing, is recorded and counted, and the conversation waits for the next run.
"""

import logging
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from activity.budget import LlmBudgetExhausted
from apikeys.caller import Caller
from apikeys.models import Agent, ApiKey
from conversations.models import Channel, Conversation, Message
from conversations.selectors import conversation_queryset_for
from extraction import stored
from extraction.decide import Bound, Scope
from extraction.models import Extraction, ExtractionPolicy, ExtractionWatermark
from extraction.prompts import SYSTEM
from extraction.services import (
    MAX_MESSAGES,
    ExtractionRequest,
    Proposed,
    SourceMessage,
    extraction_apply,
    extraction_prepare,
    extraction_propose,
    extraction_record_failure,
    extraction_record_skip,
    lock_user_first,
)
from memoryplatform.llm import LLM, LLMError, build_llm
from memoryplatform.locks import LockId, advisory_session_try_lock, advisory_session_unlock
from memoryplatform.logsafe import exception_summary
from memoryplatform.text import is_blank
from usermemory.models import Visibility

logger = logging.getLogger(__name__)

BATCH_SIZE = 20
LOCK_KEY = "background"


@dataclass
class AgentTotals:
    """What one run did for one agent."""

    extractions: int = 0
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    rejected: int = 0
    skipped: int = 0  # time order: facts whose stored value was observed after their message
    failures: int = 0
    cost: float = 0.0
    messages: int = 0
    skipped_batches: int = 0
    stopped_by_budget: bool = False
    stopped_by_llm_budget: bool = False  # the agent's LLM budget (activity.budget), not this run's cap

    def count(self, extraction: Extraction) -> None:
        """Add one extraction's counts."""
        self.extractions += 1
        self.messages += extraction.messages
        self.added += extraction.facts_added
        self.updated += extraction.facts_updated
        self.unchanged += extraction.facts_unchanged
        self.rejected += extraction.facts_rejected
        self.skipped += extraction.facts_skipped

    def as_json(self) -> dict[str, Any]:
        return {
            "extractions": self.extractions,
            "added": self.added,
            "updated": self.updated,
            "unchanged": self.unchanged,
            "rejected": self.rejected,
            "skipped": self.skipped,
            "failures": self.failures,
            "cost": round(self.cost, 6),
            "messages": self.messages,
            "skippedBatches": self.skipped_batches,
            "stoppedByBudget": self.stopped_by_budget,
            "stoppedByLlmBudget": self.stopped_by_llm_budget,
        }


def conversations_of(agent: Agent) -> list[Conversation]:
    """The conversations the agent takes part in: it may read them (group gating) and has written in them."""
    caller = Caller(role=ApiKey.Role.AGENT, agent=agent)
    wrote = Message.objects.filter(conversation=OuterRef("pk"), agent_id=agent.id)
    return list(conversation_queryset_for(caller=caller).filter(Exists(wrote)).order_by("created_at", "id"))


def _bounds(conversation: Conversation, policy: ExtractionPolicy) -> tuple[Bound, Scope]:
    """The conversation's bound and where its new facts go."""
    if conversation.group_id:
        groups = (conversation.group_id,)
        return Bound(Visibility.GROUP, groups), Scope(Visibility.GROUP, groups)
    most = policy.extraction_visibility
    return Bound(most), Scope(most)


def watermark_advance(*, conversation_id: Any, agent_id: str, read: int, to: int) -> bool:
    """Compare-and-set: move the watermark from ``read`` to ``to``; ``False`` when it is no longer at
    ``read`` (another run advanced it). Call it in the transaction that writes the batch's facts."""
    return bool(
        ExtractionWatermark.objects.filter(
            conversation_id=conversation_id, agent_id=agent_id, last_seq=read
        ).update(last_seq=to, updated_at=timezone.now())
    )


@dataclass
class _Batch:
    read: int  # the watermark when the batch was read
    last: int  # the batch's last position (the watermark counts positions: every channel's messages)
    positions: list[int]  # its messages', with those of no text
    request: ExtractionRequest | None  # None: nothing to read in it (no text)

    @property
    def rows(self) -> int:
        return len(self.positions)


def _next_batch(
    *, conversation: Conversation, agent: Agent, policy: ExtractionPolicy, batch_size: int
) -> _Batch | None:
    read = stored.watermark(conversation_id=conversation.pk, agent_id=agent.id)
    uncovered = stored.uncovered(conversation_id=conversation.pk, agent_id=agent.id, after=read)
    rows = list(
        uncovered.values_list("id", "position", "channel", "role", "content", "created_at")[:batch_size]
    )
    if not rows:
        return None
    rows = stored.of_one_kind(rows)
    bound, scope = _bounds(conversation, policy)
    messages = [
        SourceMessage(
            role,
            text,
            str(pk),
            Bound(Visibility.SELF) if channel == Channel.MEMORY else bound,
            created_at,
            position,
        )
        for pk, position, channel, role, content, created_at in rows
        if not is_blank(text := stored.message_text(content).strip())
    ]
    request = None
    if messages:
        request = ExtractionRequest(
            agent=agent,
            user_id=conversation.user_id,
            messages=messages,
            scope=scope,
            conversation_id=str(conversation.pk),
            trigger=Extraction.Trigger.BACKGROUND,
            turn_id=f"extraction:{conversation.pk}:{rows[-1][1]}",
        )
    return _Batch(read, rows[-1][1], [row[1] for row in rows], request)


def _commit(*, batch: _Batch, conversation: Conversation, agent: Agent, proposed: Proposed | None) -> Any:
    """Advance the watermark and write the batch's facts, in one transaction; ``None`` when another run
    moved the watermark first, or the extract door claimed one of the batch's messages meanwhile (nothing
    is written: the next run reads the batch again, without it)."""
    with transaction.atomic():
        if batch.request is not None:
            lock_user_first(batch.request.user_id)
        if not watermark_advance(
            conversation_id=conversation.pk, agent_id=agent.id, read=batch.read, to=batch.last
        ):
            return None
        # The compare-and-set holds the watermark's row, which the door's claim locks too: a claim of
        # these messages committed before it, or waits for this transaction.
        if stored.claimed_any(conversation_id=conversation.pk, agent_id=agent.id, positions=batch.positions):
            transaction.set_rollback(True)
            return None
        stored.settle(conversation_id=conversation.pk, agent_id=agent.id, mark=batch.last)
        if proposed is None or batch.request is None:
            return False
        return extraction_apply(request=batch.request, proposed=proposed)


def _skip(
    *, batch: _Batch, conversation: Conversation, agent: Agent, cost: float, cap: float, model: str
) -> bool:
    """Pass over a batch no run can afford (its prompt alone would ``cost`` more than ``cap``): move the
    watermark past it and record why, in one transaction; ``False`` when another run moved the watermark
    first (nothing is recorded)."""
    reason = (
        f"Passed over: the prompt of message #{batch.last} alone would cost about ${cost:.4f}, more than "
        f"maxExtractionCostPerRun (${cap:.2f}); the watermark moved past it."
    )
    with transaction.atomic():
        if batch.request is not None:
            lock_user_first(batch.request.user_id)
        if not watermark_advance(
            conversation_id=conversation.pk, agent_id=agent.id, read=batch.read, to=batch.last
        ):
            return False
        if batch.request is not None:
            extraction_record_skip(request=batch.request, reason=reason, model=model)
    logger.warning("Extraction for %s in %s: %s", agent.id, conversation.pk, reason)
    return True


def _conversation(
    *, conversation: Conversation, policy: ExtractionPolicy, llm: LLM, totals: AgentTotals, batch_size: int
) -> bool:
    """Extract the conversation's new messages batch by batch; ``False`` when the budget stops the agent."""
    agent = policy.agent
    cap = float(policy.max_extraction_cost_per_run)
    size = batch_size
    while batch := _next_batch(conversation=conversation, agent=agent, policy=policy, batch_size=size):
        proposed = None
        if batch.request is not None:
            prepared = extraction_prepare(request=batch.request)
            estimate = llm.estimate_cost(system=SYSTEM, prompt=prepared.prompt)
            if estimate > cap > 0:  # this batch alone is over the cap: no run could send it
                if batch.rows > 1:
                    size = max(1, batch.rows // 2)  # fewer messages a call, for the rest of this conversation
                    continue
                skipped = _skip(
                    batch=batch,
                    conversation=conversation,
                    agent=agent,
                    cost=estimate,
                    cap=cap,
                    model=llm.model,
                )
                if not skipped:
                    return True  # another run moved the watermark: it goes on from there
                totals.skipped_batches += 1
                continue
            if totals.cost + estimate > cap:
                totals.stopped_by_budget = True
                return False
            try:
                proposed = extraction_propose(request=batch.request, llm=llm, prepared=prepared)
            except LlmBudgetExhausted as exc:
                totals.stopped_by_llm_budget = True
                logger.info("Extraction: %s", exc.message)
                return False
            except LLMError as exc:
                extraction_record_failure(
                    request=batch.request, error=str(exc), cost=exc.cost, model=llm.model
                )
                totals.cost += exc.cost
                totals.failures += 1
                logger.warning(  # the error itself is the extraction's record (its text may quote the chat)
                    "Extraction for %s in %s failed: %s", agent.id, conversation.pk, exception_summary(exc)
                )
                return True  # this conversation waits for the next run; the others go on
            totals.cost += proposed.cost
        outcome = _commit(batch=batch, conversation=conversation, agent=agent, proposed=proposed)
        if outcome is None:
            logger.info(
                "Extraction: %s's watermark in %s moved meanwhile; batch left", agent.id, conversation.pk
            )
            return True
        if outcome:
            totals.count(outcome.extraction)
    return True


def extraction_run_background(*, agent_id: str | None = None, batch_size: int = BATCH_SIZE) -> dict[str, Any]:
    """One background run over the agents whose policy has ``extractFromConversations`` (or only
    ``agent_id``): per agent, its conversations in order until they are read or its budget is spent.
    Returns the run's counts per agent; ``skipped`` without an LLM or when another run holds the lock."""
    if not 1 <= batch_size <= MAX_MESSAGES:
        raise ValueError(f"batch_size is 1 to {MAX_MESSAGES}")
    try:
        llm = build_llm()
    except LLMError as exc:
        return {"skipped": f"the LLM settings are wrong: {exc}"}
    if llm is None:
        return {"skipped": "LLM_PROVIDER is empty"}
    if not advisory_session_try_lock(LockId.EXTRACTION, LOCK_KEY):
        return {"skipped": "another background extraction is running"}
    try:
        policies = ExtractionPolicy.objects.filter(extract_from_conversations=True).select_related("agent")
        if agent_id is not None:
            policies = policies.filter(agent_id=agent_id)
        agents: dict[str, Any] = {}
        for policy in policies.exclude(agent__status=Agent.Status.UNAVAILABLE).order_by("agent_id"):
            totals = AgentTotals()
            for conversation in conversations_of(policy.agent):
                if not _conversation(
                    conversation=conversation, policy=policy, llm=llm, totals=totals, batch_size=batch_size
                ):
                    logger.info("Extraction for %s stops at a budget: %s", policy.agent_id, totals.as_json())
                    break
            agents[policy.agent_id] = totals.as_json()
        return {"agents": agents}
    finally:
        advisory_session_unlock(LockId.EXTRACTION, LOCK_KEY)
