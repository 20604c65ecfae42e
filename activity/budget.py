"""Each agent's LLM budget (issue 44): the dollars its LLM calls may spend in any window of
``LLM_BUDGET_WINDOW`` seconds, whichever door makes them: extraction (REST, MCP, the Python client, the
background run), Dream's summaries and its confirmations of contradictions by meaning. The budget is the
agent's ``memoryPolicy.llmBudget``, else ``LLM_BUDGET_PER_AGENT``.

One ledger, :class:`activity.models.LlmSpend`, one row per call. Before a call, :meth:`AgentBudget.reserve`
takes the agent's advisory lock (``LockId.LLM_BUDGET``, for the transaction), sums the agent's rows in the
window, and either inserts the call's row at the most it may cost (its prompt's estimated tokens in and
``LLM_MAX_TOKENS`` out: :meth:`memoryplatform.llm.LLM.worst_cost`) or refuses the call with
:class:`LlmBudgetExhausted` (429 ``rate_limited``), naming the budget, what was spent, the window and when
enough of the spending leaves it. The lock makes the check and the reservation one step: calls of one agent
at once cannot together take more than its budget. Once the call answered or failed,
:meth:`AgentBudget.settle` writes its cost from the provider's usage on its row, releasing the rest of the
reservation (all of it when the call cost nothing).

A provider never writes more than ``max_tokens``, so the spending stays within the budget however many calls
run at once, as long as the provider counts the prompt within its estimate (4 characters a token). A model
priced at 0 records nothing. Dream's housekeeping deletes the rows past the window
(:func:`llm_spend_prune`).
"""

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.db import transaction
from django.db.models import F, Sum, Window
from django.utils import timezone

from activity.models import ActivityPolicy, LlmSpend
from memoryplatform.errors import RateLimited
from memoryplatform.llm import stored_cost
from memoryplatform.locks import LockId, advisory_xact_lock


@dataclass(frozen=True)
class Budget:
    """An agent's budget: ``dollars`` per ``window``; ``source``: the setting it comes from."""

    dollars: Decimal
    window: timedelta
    source: str


def budget_of(agent_id: str) -> Budget:
    """The agent's ``memoryPolicy.llmBudget``, else ``LLM_BUDGET_PER_AGENT``, over ``LLM_BUDGET_WINDOW``."""
    window = timedelta(seconds=settings.LLM_BUDGET_WINDOW)
    own = ActivityPolicy.objects.filter(agent_id=agent_id).values_list("llm_budget", flat=True).first()
    if own is not None:
        return Budget(own, window, "memoryPolicy.llmBudget")
    return Budget(Decimal(str(settings.LLM_BUDGET_PER_AGENT)), window, "LLM_BUDGET_PER_AGENT")


def _window_text(window: timedelta) -> str:
    seconds = int(window.total_seconds())
    if seconds % 3600 == 0:
        return f"{seconds // 3600} h"
    return f"{seconds} s"


class LlmBudgetExhausted(RateLimited):
    """A call refused before it was made: the agent's spending in the window, plus the most the call may
    cost (``estimate``), is past its budget. ``frees_at``: when enough of the spending has left the window
    for the call to fit (``None``: the call alone is more than the budget)."""

    def __init__(
        self,
        *,
        agent_id: str,
        budget: Budget,
        spent: Decimal,
        estimate: Decimal,
        now: datetime,
        frees_at: datetime | None,
    ) -> None:
        window = _window_text(budget.window)
        if frees_at is None:
            when = "it never fits: the call alone is more than the budget"
        else:
            self.retry_after = max(1, math.ceil((frees_at - now).total_seconds()))
            when = f"it fits again at {frees_at.isoformat(timespec='seconds')} (in {self.retry_after} s)"
        super().__init__(
            f"LLM budget reached: agent '{agent_id}' spent ${spent:.6f} of its ${budget.dollars:.2f} in the "
            f"last {window} ({budget.source} over LLM_BUDGET_WINDOW); this call may cost up to "
            f"${estimate:.6f} (its prompt and LLM_MAX_TOKENS of answer), and {when}.",
            details={
                "limit": "llmBudget",
                "source": budget.source,
                "budget": float(budget.dollars),
                "spent": float(spent),
                "estimate": float(estimate),
                "windowSeconds": int(budget.window.total_seconds()),
                "freesAt": frees_at.isoformat() if frees_at else None,
                "retryAfter": self.retry_after,
            },
        )


def _frees_at(*, agent_id: str, since: datetime, window: timedelta, need: Decimal) -> datetime | None:
    """When the oldest of the agent's rows in the window, summing to at least ``need``, have left it."""
    running = Window(Sum("cost"), order_by=[F("at").asc(), F("id").asc()])
    at = (
        LlmSpend.objects.filter(agent_id=agent_id, at__gt=since)
        .annotate(running=running)
        .filter(running__gte=need)
        .order_by("at", "id")
        .values_list("at", flat=True)
        .first()
    )
    return at + window if at is not None else None


def llm_spend_reserve(*, agent_id: str, use: str, estimate: float) -> int:
    """Reserve ``estimate`` dollars (the most the call may cost) of the agent's budget for one call (its
    ledger row's id), or raise :class:`LlmBudgetExhausted`. One transaction under the agent's advisory lock:
    the sum and the insert."""
    budget = budget_of(agent_id)
    cost = stored_cost(estimate)
    with transaction.atomic():
        advisory_xact_lock(LockId.LLM_BUDGET, agent_id)
        now = timezone.now()
        since = now - budget.window
        mine = LlmSpend.objects.filter(agent_id=agent_id, at__gt=since)
        spent = mine.aggregate(total=Sum("cost"))["total"] or Decimal(0)
        if spent + cost > budget.dollars:
            frees_at = None
            if cost <= budget.dollars:
                need = spent + cost - budget.dollars
                frees_at = _frees_at(agent_id=agent_id, since=since, window=budget.window, need=need)
            raise LlmBudgetExhausted(
                agent_id=agent_id, budget=budget, spent=spent, estimate=cost, now=now, frees_at=frees_at
            )
        return LlmSpend.objects.create(agent_id=agent_id, use=use, cost=cost, at=now).pk


def llm_spend_settle(*, spend_id: int, cost: float) -> None:
    """Write the call's cost (the provider's usage) on its row, in place of its reservation: the difference
    is released."""
    LlmSpend.objects.filter(pk=spend_id).update(cost=stored_cost(cost), settled=True)


def llm_spend_prune(*, now: datetime) -> int:
    """Dream's housekeeping: delete the rows past the window (they count no more). Returns how many."""
    since = now - timedelta(seconds=settings.LLM_BUDGET_WINDOW)
    deleted, _ = LlmSpend.objects.filter(at__lte=since).delete()
    return deleted


class AgentBudget:
    """The :class:`memoryplatform.llm.Spending` of one call paid by ``agent_id``'s budget (make one per
    call): ``LLM.complete_json(..., spending=AgentBudget(agent_id=..., use=...))``."""

    def __init__(self, *, agent_id: str, use: str) -> None:
        self.agent_id = agent_id
        self.use = use
        self.spend_id: int | None = None

    def reserve(self, estimate: float) -> None:
        self.spend_id = llm_spend_reserve(agent_id=self.agent_id, use=self.use, estimate=estimate)

    def settle(self, cost: float) -> None:
        if self.spend_id is not None:
            llm_spend_settle(spend_id=self.spend_id, cost=cost)


def rerank_spending(agent_id: str) -> AgentBudget:
    """The spending of one LLM rerank call for ``agent_id`` (:func:`memoryplatform.llm.register_spending`)."""
    return AgentBudget(agent_id=agent_id, use=LlmSpend.Use.RERANK)
