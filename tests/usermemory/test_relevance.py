"""Scores that mean relevance (``memoryplatform.relevance``): in [0, 1], the same scale for every query, so
that ``minScore`` means one thing at every door; no statistic over rows the caller cannot read; the filters of
every ranked read, in the same statement as visibility. What the reads that fill an agent's context return by
default (the best k, no cut): ``test_top_k.py``."""

import pytest

from tests.helpers import assert_envelope
from tests.usermemory.ranked import BASE, QUESTION, SEEN, U

SEARCH = f"{BASE}/{U}/search"
VISIBLE = f"{BASE}/{U}/visible"

FACTS = {
    "home_town": "Hamburg",
    "native_language": "speaks German and some Spanish",
    "pet": "a grey cat called Moritz",
    "job": "works as a nurse at night",
    "coffee": "drinks oat milk flat whites",
}


@pytest.fixture
def facts(agent_a_api, put, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        for key, value in FACTS.items():
            category = "context" if key in ("home_town", "job") else "fact"
            body = {"userId": U, "key": key, "value": value, "category": category, "visibility": "global"}
            assert put(agent_a_api, **body).status_code == 201


def search(client, **params):
    response = client.get(SEARCH, {"mode": "hybrid", **params})
    assert response.status_code == 200, response.content
    return response.json()


def scores_of(entries):
    return {e["key"]: e["score"] for e in entries}


def test_scores_are_probabilities_the_same_for_every_query(facts, agent_a_api):
    on_topic = search(agent_a_api, q="which language does the user speak")
    assert on_topic[0]["key"] == "native_language"
    assert all(0.0 <= e["score"] <= 1.0 for e in on_topic)
    off_topic = search(agent_a_api, q="what is the user's favourite football team")
    # a question about nothing the user said scores low, wherever it ranks its best: not min-max scaled
    assert max(e["score"] for e in off_topic) < 0.5 <= on_topic[0]["score"]
    assert search(agent_a_api, q="what is the user's favourite football team", minScore=0.5) == []


@pytest.mark.parametrize("mode", ["hybrid", "semantic"])
def test_min_score_leaves_out_what_scores_under_it(facts, agent_a_api, mode):
    every = search(agent_a_api, q="which language does the user speak", mode=mode, minScore=0)
    assert len(every) == len(FACTS)
    threshold = every[1]["score"] + (every[0]["score"] - every[1]["score"]) / 2
    above = search(agent_a_api, q="which language does the user speak", mode=mode, minScore=threshold)
    assert [e["key"] for e in above] == [every[0]["key"]] == ["native_language"]


def test_no_oracle_hidden_rows_change_no_score(matrix):
    """Agent b's scores are the same before and after agent a writes, hidden from b, an entry that matches the
    query in words and meaning: no statistic is computed over rows b cannot read."""
    before = search(matrix["b"], q=QUESTION, minScore=0)
    for n in range(5):
        body = {"userId": U, "key": f"secret_food_{n}", "value": "what does the user eat? eats sushi daily"}
        assert matrix["a"].put(BASE, body, format="json").status_code == 201
    after = search(matrix["b"], q=QUESTION, minScore=0)
    assert scores_of(after) == scores_of(before)
    assert set(scores_of(after)) == SEEN["b"]


@pytest.mark.parametrize("value", ["-0.1", "1.5", "nan", "high", "true"])
@pytest.mark.parametrize("door", ["search", "visible"])
def test_a_min_score_outside_0_1_is_a_400(agent_a_api, door, value):
    path, extra = (SEARCH, {"mode": "hybrid"}) if door == "search" else (VISIBLE, {})
    response = agent_a_api.get(path, {"q": "food", "minScore": value, **extra})
    assert_envelope(response, 400, "bad_request")


def test_keyword_search_takes_no_min_score(agent_a_api):
    response = agent_a_api.get(SEARCH, {"q": "food", "mode": "keyword", "minScore": "0.5"})
    assert_envelope(response, 400, "bad_request")
    assert "minScore" in response.content.decode()


def test_a_recall_filter_without_q_is_a_400(agent_a_api):
    for name, value in [("minScore", "0.5"), ("category", "fact"), ("keyPrefix", "f")]:
        response = agent_a_api.get(VISIBLE, {name: value})
        assert_envelope(response, 400, "bad_request")
        assert name in response.content.decode()


# --- Filters ---------------------------------------------------------------------------------------------


def keys_of(entries):
    return {e["key"] for e in entries}


@pytest.mark.parametrize("mode", ["hybrid", "semantic", "keyword"])
def test_search_filters_narrow_inside_visibility(facts, agent_a_api, agent_b_api, put, mode):
    body = {
        "userId": U,
        "key": "b_note",
        "value": "a note",
        "visibility": "global",
        "source": "observed_pattern",
    }
    assert put(agent_b_api, **body).status_code == 201
    q = "a" if mode == "keyword" else "the user"
    every = {"q": q, "mode": mode, **({} if mode == "keyword" else {"minScore": 0})}
    assert keys_of(search(agent_a_api, **every, category=["context"])) <= {"home_town", "job"}
    assert keys_of(search(agent_a_api, **every, category=["context", "fact"])) >= {"home_town"}
    assert keys_of(search(agent_a_api, **every, agentId="agent-b")) <= {"b_note"}
    assert keys_of(search(agent_a_api, **every, source="observed_pattern")) <= {"b_note"}
    assert keys_of(search(agent_a_api, **every, keyPrefix="ho")) <= {"home_town"}
    assert search(agent_a_api, **every, updatedAfter="2999-01-01T00:00:00Z") == []
    # a filter never widens: agent b's own entry stays unseen by b's rival when self
    secret = {"userId": U, "key": "b_secret", "value": "a secret note", "source": "observed_pattern"}
    assert put(agent_b_api, **secret).status_code == 201
    assert "b_secret" not in keys_of(search(agent_a_api, **every, agentId="agent-b"))


def test_visible_q_filters(facts, agent_a_api):
    found = agent_a_api.get(VISIBLE, {"q": "the user", "category": "context", "minScore": 0}).json()
    assert keys_of(found) == {"home_town", "job"}
    found = agent_a_api.get(VISIBLE, {"q": "the user", "keyPrefix": "pe", "minScore": 0}).json()
    assert keys_of(found) == {"pet"}


def test_search_tool_takes_min_score(facts, agent_a_api):
    def invoke(**arguments):
        body = {"userId": U, "arguments": arguments}
        return agent_a_api.post("/v1/tools/searchMemory/invoke", body, format="json")

    top = search(agent_a_api, q="which language does the user speak")[0]["score"]
    on_topic = invoke(query="which language does the user speak", minScore=top).json()["result"]
    assert "native_language" in on_topic and "pet" not in on_topic
    every = invoke(query="which language does the user speak").json()["result"]
    assert all(key in every for key in FACTS)
    for bad, says in (
        ({"minScore": 2}, "minScore"),
        ({"minScore": True}, "minScore"),
        ({"minScore": 0.5, "mode": "keyword"}, "keyword"),
    ):
        refused = invoke(query="x", **bad).json()["result"]  # a tool refuses in its result, for the model
        assert refused.startswith("❌ Invalid arguments") and says in refused
