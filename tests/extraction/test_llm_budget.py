"""Each agent's LLM budget (issue 44, finding 5) at the doors of extraction: REST (agent and admin keys),
the background run, and calls at once; ``memoryPolicy.llmBudget`` over ``LLM_BUDGET_PER_AGENT``. The budget is
checked before the call, from the most the call may cost (its prompt's estimate and ``LLM_MAX_TOKENS`` of
answer) and what the agent spent in the window; a refusal is a 429 ``rate_limited`` naming the budget, the
spending, the window and when it frees up. The call's row is settled to its cost after (issue 53)."""

import math
import threading
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.db import connections
from django.db.models import Sum
from rest_framework.test import APIClient

from activity.models import LlmSpend
from extraction.models import Extraction, ExtractionWatermark
from extraction.prompts import SYSTEM
from tests.extraction.conftest import fact, facts
from tests.extraction.test_api import extract
from tests.extraction.test_background import conversation, run, say
from tests.helpers import assert_envelope
from tests.llm_server import Answer

CALL = Decimal("0.120000")  # 1,000 tokens in and 200 out at $100 per million
ANSWER_AT_MOST = 1024 * 100 / 1_000_000  # LLM_MAX_TOKENS out at $100 per million: $0.1024


def estimate_of(request: dict[str, Any]) -> float:
    """What the budget was checked with: the prompt's characters / 4, in tokens, and ``LLM_MAX_TOKENS`` out,
    at $100/M (about $0.13 for these prompts)."""
    prompt = request["messages"][-1]["content"]
    return math.ceil((len(SYSTEM) + len(prompt)) / 4) * 100 / 1_000_000 + ANSWER_AT_MOST


def test_the_extract_door_stops_at_the_agents_budget_before_the_call(
    llm, agent_a, agent_a_api, admin_api, settings
):
    settings.LLM_BUDGET_PER_AGENT = 0.40
    llm.answers = [facts(fact("diet", "vegan"))]
    for _ in range(3):  # each call's most fits: $0.36 spent in all
        assert extract(agent_a_api).status_code == 200

    response = extract(agent_a_api)  # on main: 200, and the spending goes on without end

    body = assert_envelope(response, 429, "rate_limited")
    assert len(llm.requests) == 3 and Extraction.objects.count() == 3  # refused before any call
    first = LlmSpend.objects.order_by("at", "id").first()
    details = body["details"]
    assert details == {
        "limit": "llmBudget",
        "source": "LLM_BUDGET_PER_AGENT",
        "budget": 0.4,
        "spent": 0.36,
        "estimate": pytest.approx(estimate_of(llm.requests[-1]), abs=1e-6),
        "windowSeconds": 86_400,
        "freesAt": (first.at + timedelta(days=1)).isoformat(),
        "retryAfter": details["retryAfter"],
    }
    assert 0 < details["retryAfter"] <= 86_400 and response.headers["Retry-After"] == str(
        details["retryAfter"]
    )
    assert "LLM budget reached" in body["error"] and "$0.40" in body["error"] and "24 h" in body["error"]
    # One row per call, settled at the provider's usage.
    rows = LlmSpend.objects.order_by("at", "id").values_list("agent_id", "use", "cost", "settled")
    assert list(rows) == [("agent-a", "extraction", CALL, True)] * 3
    # An admin key extracting as the agent spends the agent's budget, not its own.
    assert_envelope(extract(admin_api, agentId="agent-a"), 429, "rate_limited")
    # Once the first call's spending has left the window, the next call fits again.
    LlmSpend.objects.filter(pk=first.pk).update(at=first.at - timedelta(days=1))
    assert extract(agent_a_api).status_code == 200 and len(llm.requests) == 4


def test_a_failed_call_is_charged_what_it_cost(openai_llm, agent_a, agent_a_api, settings):
    settings.LLM_BUDGET_PER_AGENT = 0.30
    openai_llm.answers = [Answer("{not json"), Answer(status=500), facts(fact("diet", "vegan"))]

    assert_envelope(extract(agent_a_api), 502, "upstream_failed")  # paid: $0.12
    assert_envelope(extract(agent_a_api), 502, "upstream_failed")  # an HTTP error: its reservation released
    assert extract(agent_a_api).status_code == 200  # $0.12 + its most (~$0.13) fit in $0.30
    assert_envelope(extract(agent_a_api), 429, "rate_limited")

    costs = list(LlmSpend.objects.order_by("at", "id").values_list("cost", flat=True))
    assert costs == [CALL, Decimal(0), CALL]


def test_the_agents_policy_sets_its_own_budget(
    openai_llm, agent_a, agent_b, agent_a_api, agent_b_api, admin_api
):
    openai_llm.answers = [facts(fact("diet", "vegan"))]
    patch = {"memoryPolicy": {"llmBudget": 0.15}}
    assert_envelope(agent_a_api.patch("/v1/agents/agent-a", patch, format="json"), 403, "forbidden")
    policy = admin_api.patch("/v1/agents/agent-a", patch, format="json").json()["memoryPolicy"]
    assert policy["llmBudget"] == 0.15

    assert extract(agent_a_api).status_code == 200  # nothing spent yet: its most fits in $0.15
    body = assert_envelope(extract(agent_a_api), 429, "rate_limited")
    assert body["details"]["source"] == "memoryPolicy.llmBudget" and body["details"]["budget"] == 0.15
    assert extract(agent_b_api).status_code == 200  # another agent's budget is its own

    reset = admin_api.patch("/v1/agents/agent-a", {"memoryPolicy": {"llmBudget": None}}, format="json")
    assert reset.json()["memoryPolicy"]["llmBudget"] is None  # LLM_BUDGET_PER_AGENT ($5) again
    assert extract(agent_a_api).status_code == 200
    refused = admin_api.patch("/v1/agents/agent-a", {"memoryPolicy": {"llmBudget": -1}}, format="json")
    assert_envelope(refused, 400, "bad_request")


def test_a_background_run_stops_at_the_budget_the_door_spent(
    openai_llm, agent_a, admin_api, agent_a_api, set_policy, settings
):
    settings.LLM_BUDGET_PER_AGENT = 0.15
    set_policy(agent_a, extract_from_conversations=True)
    cid = conversation(admin_api)
    say(agent_a_api, cid, "I live in Lisbon.")
    openai_llm.answers = [facts(fact("home_city", "Lisbon"))]
    assert extract(agent_a_api).status_code == 200  # $0.12 of $0.15: the next call's most is past it

    done = run("agent-a")["agents"]["agent-a"]

    assert (done["stoppedByLlmBudget"], done["stoppedByBudget"], done["extractions"]) == (True, False, 0)
    assert len(openai_llm.requests) == 1
    assert ExtractionWatermark.objects.get(conversation_id=cid).last_seq == 0  # read when it frees up
    LlmSpend.objects.update(at=LlmSpend.objects.get().at - timedelta(days=2))
    again = run("agent-a")["agents"]["agent-a"]
    assert (again["stoppedByLlmBudget"], again["extractions"]) == (False, 1)
    assert LlmSpend.objects.filter(use="extraction").count() == 2


@pytest.mark.django_db(transaction=True)
def test_calls_at_once_cannot_share_the_last_of_a_budget(openai_llm, agent_a, agent_a_api, settings):
    """Ten calls released together: the check and the reservation are one step under the agent's lock, so
    one call takes the budget and the nine others are refused; without the lock, several read $0 spent."""
    settings.LLM_BUDGET_PER_AGENT = 0.20  # one call's most (about $0.13) fits, not two
    openai_llm.answers = [Answer({"facts": []}, delay=0.2)]
    barrier = threading.Barrier(10)
    statuses: list[int] = [0] * 10

    def target(i: int) -> None:
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {agent_a_api.raw_key}")
        try:
            barrier.wait(timeout=30)
            statuses[i] = extract(client).status_code
        finally:
            connections.close_all()

    threads = [threading.Thread(target=target, args=(i,)) for i in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)

    assert sorted(statuses) == [200] + [429] * 9
    assert len(openai_llm.requests) == 1 and LlmSpend.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_calls_at_once_never_spend_past_the_budget(openai_llm, agent_a, agent_a_api, settings):
    """Issue 53, finding 13: each answer costs more than its prompt (1,000 tokens written). Reserving only the
    prompt's estimate (about $0.028), ten calls at once all fit in $0.30 and spend $1.20; reserving the most
    each may cost ($0.13) admits two, and each row is settled to what the call cost."""
    settings.LLM_BUDGET_PER_AGENT = 0.30
    openai_llm.answers = [Answer({"facts": []}, input_tokens=200, output_tokens=1000, delay=0.2)]  # $0.12
    barrier = threading.Barrier(10)
    statuses: list[int] = [0] * 10

    def target(i: int) -> None:
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {agent_a_api.raw_key}")
        try:
            barrier.wait(timeout=30)
            statuses[i] = extract(client).status_code
        finally:
            connections.close_all()

    threads = [threading.Thread(target=target, args=(i,)) for i in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)

    assert sorted(statuses) == [200] * 2 + [429] * 8
    prompt_at_most = min(estimate_of(request) - ANSWER_AT_MOST for request in openai_llm.requests)
    assert prompt_at_most >= 200 * 100 / 1_000_000  # the usage's 200 prompt tokens are within the estimate
    spent = LlmSpend.objects.aggregate(total=Sum("cost"))["total"]
    assert spent == Decimal("0.24") <= Decimal("0.30")
    assert list(LlmSpend.objects.values_list("cost", "settled")) == [(CALL, True)] * 2
