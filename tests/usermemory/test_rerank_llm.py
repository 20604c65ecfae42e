"""``RERANK_PROVIDER=llm`` (issue 55): the LLM of ``LLM_*`` (the scripted server, ``tests/llm_server.py``)
reads the question and the candidates the reader may see, and its relevances order and score them. Paid
from the reading agent's LLM budget. Any hostile answer (another id, one left out or named twice, too deep,
not JSON, a relevance outside [0, 1], an error, too slow) and a spent budget answer with the first stage and
say so (``X-Search-Fallback: unreranked``), never a 5xx, never a row the reader could not read."""

import json
from collections.abc import Iterator

import pytest
from django.test import override_settings

from activity.models import LlmSpend
from memoryplatform.rerank import get_reranker
from tests.llm_server import Answer, LLMScript, llm_server
from tests.usermemory.ranked import BASE, QUESTION, SEEN, U

SEARCH = f"{BASE}/{U}/search"
VISIBLE = f"{BASE}/{U}/visible"
PRICES = {"test-model": [100.0, 100.0]}  # $100 per million tokens: 1,000 in and 200 out cost $0.12


@pytest.fixture
def llm() -> Iterator[LLMScript]:
    """The scripted LLM as the reranker (answers set by each test), with a timeout of 2 s."""
    script = LLMScript([])
    settings = {
        "LLM_PROVIDER": "openai",
        "LLM_MODEL": "test-model",
        "LLM_PRICES": PRICES,
        "RERANK_PROVIDER": "llm",
        "RERANK_TIMEOUT": 2,
    }
    with llm_server(script):
        get_reranker.cache_clear()
        try:
            with override_settings(LLM_URL=script.url, **settings):
                yield script
        finally:
            get_reranker.cache_clear()


def keys(entries):
    return [e["key"] for e in entries]


def first_stage(client, path=SEARCH, **params):
    """The first stage's answer (no reranker configured), to compare with."""
    get_reranker.cache_clear()
    with override_settings(RERANK_PROVIDER="none"):
        response = client.get(path, {"q": QUESTION, **params})
    get_reranker.cache_clear()
    return response.json()


def relevances(*pairs):
    return Answer({"scores": [{"id": i, "relevance": r} for i, r in pairs]})


def test_the_llm_orders_and_scores_what_the_reader_may_see(matrix, llm):
    before = first_stage(matrix["b"], mode="hybrid")
    # the reverse of the first stage: the last candidate most relevant
    llm.answers = [relevances(*[(i, round(0.1 + 0.2 * i, 2)) for i in range(5)])]
    response = matrix["b"].get(SEARCH, {"q": QUESTION, "mode": "hybrid"})
    assert response.status_code == 200 and "X-Search-Fallback" not in response.headers
    found = response.json()
    assert keys(found) == list(reversed(keys(before)))
    assert [e["score"] for e in found] == [0.9, 0.7, 0.5, 0.3, 0.1]
    prompt = json.loads(llm.requests[0]["messages"][-1]["content"])
    assert prompt["question"] == QUESTION
    sent = [m["memory"] for m in prompt["memories"]]
    assert [m["id"] for m in prompt["memories"]] == list(range(5))
    assert [text.split(":")[0] for text in sent] == keys(before)  # in the first stage's order
    assert {text.split(":")[0] for text in sent} == SEEN["b"]  # only what b may read
    # the call is paid by the reader, as a rerank, at its usage's cost
    spend = LlmSpend.objects.get()
    assert (spend.agent_id, spend.use, spend.settled, float(spend.cost)) == ("agent-b", "rerank", True, 0.12)


def test_a_recall_by_relevance_is_reranked_too(matrix, llm):
    before = first_stage(matrix["b"], path=VISIBLE)
    llm.answers = [relevances(*[(i, round(0.1 + 0.2 * i, 2)) for i in range(5)])]
    response = matrix["b"].get(VISIBLE, {"q": QUESTION})
    assert "X-Search-Fallback" not in response.headers
    assert keys(response.json()) == list(reversed(keys(before)))


HOSTILE = {
    "another id": relevances((0, 0.9), (1, 0.8), (2, 0.7), (3, 0.6), (7, 0.99)),
    "an id left out": relevances((0, 0.9), (1, 0.8), (2, 0.7), (3, 0.6)),
    "an id twice": relevances((0, 0.9), (1, 0.8), (2, 0.7), (3, 0.6), (3, 0.99)),
    "an extra id": relevances(*[(i, 0.5) for i in range(6)]),
    "a relevance above 1": relevances((0, 9.0), (1, 0.8), (2, 0.7), (3, 0.6), (4, 0.5)),
    "a string id": Answer({"scores": [{"id": "0", "relevance": 0.9}]}),
    "too deep": Answer('{"scores": ' + "[" * 200 + "]" * 200 + "}"),
    "not JSON": Answer("The most relevant memory is the first one."),
    "no scores": Answer({"order": [4, 3, 2, 1, 0]}),
    "an error": Answer(status=500),
    "too slow": Answer(relevances(*[(i, 0.5) for i in range(5)]).content, delay=4),
}


@pytest.mark.parametrize("answer", list(HOSTILE.values()), ids=list(HOSTILE))
def test_a_hostile_answer_falls_back_to_the_first_stage(matrix, llm, answer):
    before = first_stage(matrix["b"], mode="hybrid")
    llm.answers = [answer]
    for path, params in ((SEARCH, {"mode": "hybrid"}), (VISIBLE, {})):
        response = matrix["b"].get(path, {"q": QUESTION, **params})
        assert response.status_code == 200, response.content
        assert response.headers["X-Search-Fallback"] == "unreranked"
        found = response.json()
        assert set(keys(found)) <= SEEN["b"]
        if path == SEARCH:
            assert [(e["key"], e["score"]) for e in found] == [(e["key"], e["score"]) for e in before]
    assert llm.requests  # the model was asked, and not believed


def test_a_spent_budget_falls_back_without_a_call(matrix, llm, admin_api):
    spent = admin_api.patch("/v1/agents/agent-b", {"memoryPolicy": {"llmBudget": 0}}, format="json")
    assert spent.status_code == 200, spent.content
    llm.answers = [relevances(*[(i, 0.5) for i in range(5)])]
    response = matrix["b"].get(SEARCH, {"q": QUESTION, "mode": "hybrid"})
    assert response.status_code == 200 and response.headers["X-Search-Fallback"] == "unreranked"
    assert llm.requests == [] and not LlmSpend.objects.exists()
