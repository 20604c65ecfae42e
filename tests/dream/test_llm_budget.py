"""Each agent's LLM budget (issue 44, finding 5) in a Dream cycle, through `manage.py dream`: the summaries
and the confirmations of contradictions by meaning are paid by an agent's budget, which extraction spends
too; a call the budget refuses is not made, and the cycle goes on. The cycle deletes the spending past the
window."""

from datetime import timedelta
from decimal import Decimal

from django.utils import timezone

from activity.models import LlmSpend
from dream.models import DreamRun
from tests.dream.test_commands import run_dream
from tests.dream.test_llm_answers import _similar_keys
from tests.dream.test_summaries import _groups, _one_summary
from tests.extraction.conftest import fact, facts
from tests.extraction.test_api import extract
from tests.llm_server import Answer


def test_summaries_stop_at_the_budget_extraction_spent_too(llm, agent_a, agent_a_api, dream_policy, settings):
    settings.LLM_BUDGET_PER_AGENT = 0.25
    groups = _groups(agent_a_api)
    dream_policy(agent_a, prune_stale_after_days=0, summarize_interactions=True, summarize_min_entries=3)
    old = LlmSpend.objects.create(
        agent=agent_a, use="summary", cost=100, at=timezone.now() - timedelta(days=2)
    )
    llm.answers = [
        facts(fact("diet", "vegan")),  # the extract door: $0.12
        _one_summary(groups["context"], "ctx"),  # $0.12 more: $0.24, and the next prompt's (~$0.01) is past
        _one_summary(groups["fact"], "facts"),
    ]
    assert extract(agent_a_api).status_code == 200

    run_dream("--no-progress")  # on main: three summaries, whatever the agent spent

    run = DreamRun.objects.get()
    assert run.status == "succeeded" and len(llm.requests) == 2
    assert (run.summaries_written, run.details["summaries"]["stoppedByLlmBudget"]) == (1, ["agent-a"])
    assert run.details["llmCalls"]["calls"] == 1  # the refused call was not made, nor counted
    rows = LlmSpend.objects.order_by("at", "id").values_list("use", "cost", "settled")
    assert list(rows) == [("extraction", Decimal("0.12"), True), ("summary", Decimal("0.12"), True)]
    assert run.details["llmSpendDeleted"] == 1 and not LlmSpend.objects.filter(pk=old.pk).exists()


def test_each_confirmation_is_paid_by_the_agent_whose_entries_it_is_about(
    llm, agent_a, agent_b, agent_a_api, agent_b_api, dream_policy
):
    _similar_keys(agent_a_api, ["u1"], n=3)  # 3 pairs of agent-a's entries
    _similar_keys(agent_b_api, ["u2"], n=3)  # 3 pairs of agent-b's
    for agent, budget in ((agent_a, Decimal(0)), (agent_b, None)):  # agent-a may spend nothing
        dream_policy(
            agent,
            prune_stale_after_days=0,
            semantic_contradiction_threshold=0.1,
            confirm_contradictions_with_llm=True,
            llm_budget=budget,
        )
    llm.answers = [Answer({"contradiction": True})]

    run_dream("--no-progress")

    run = DreamRun.objects.get()
    meaning = run.details["meaning"]
    assert run.status == "succeeded" and len(llm.requests) == 3
    assert (meaning["stoppedByLlmBudget"], meaning["notAskedByCap"], meaning["pairCount"]) == (
        ["agent-a"],
        3,
        3,
    )
    assert run.details["llmCalls"]["calls"] == 3
    rows = LlmSpend.objects.values_list("agent_id", "use", "cost")
    assert sorted(rows) == [("agent-b", "confirmation", Decimal("0.12"))] * 3
