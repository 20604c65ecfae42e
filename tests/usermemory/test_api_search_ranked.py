"""Search by meaning (semantic) and by meaning and words fused (hybrid), through REST with the role keys:
relevance order with a score, only the caller's visible entries at any limit, and full text when the embedder
is down."""

import json
import time

import pytest
from django.test import override_settings

from memoryplatform import relevance
from memoryplatform.embeddings import get_embedder
from tests.embedding_server import scripted_embedder
from tests.helpers import assert_envelope
from tests.usermemory.ranked import BASE, ENTRIES, QUESTION, SEEN, U, embedder_down, fallbacks


def search(client, q=QUESTION, **params):
    response = client.get(f"{BASE}/{U}/search", {"q": q, **params})
    assert response.status_code == 200, response.content
    return response


def test_a_write_is_found_by_meaning_at_once_with_a_score(
    agent_a_api, put, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):  # the request's own after-commit embedding
        for key, value in [("car", "a red Volvo estate"), ("food", "spicy ramen"), ("pet", "a cat, Miso")]:
            assert put(agent_a_api, userId=U, key=key, value=value).status_code == 201
    for mode in ("semantic", "hybrid"):
        response = search(agent_a_api, mode=mode)
        assert "X-Search-Fallback" not in response.headers
        found = response.json()
        assert [e["key"] for e in found][0] == "food", found
        scores = [e["score"] for e in found]
        assert all(isinstance(s, float) for s in scores) and scores == sorted(scores, reverse=True)
    # keyword stays EDDI's literal match, newest first, with no score
    keyword = search(agent_a_api, q="ramen").json()
    assert [e["key"] for e in keyword] == ["food"] and "score" not in keyword[0]
    assert search(agent_a_api, q=QUESTION, mode="keyword").json() == []


def test_hybrid_full_text_matches_any_word_of_a_question(agent_a_api, put):
    # No commit hook ran: no vectors. The full-text side alone finds the entry by one of the question's words.
    put(agent_a_api, userId=U, key="lunch", value="Ramen on Fridays")
    put(agent_a_api, userId=U, key="car", value="a red Volvo")
    assert [e["key"] for e in search(agent_a_api, q="Which ramen place?", mode="hybrid").json()] == ["lunch"]
    assert search(agent_a_api, q="?!", mode="hybrid").json() == []  # no word: nothing, never an error


@pytest.mark.parametrize("mode", ["fuzzy", "KEYWORD", "semantic,hybrid"])
def test_an_unknown_mode_is_a_400_in_the_envelope(agent_a_api, mode):
    assert_envelope(agent_a_api.get(f"{BASE}/{U}/search", {"q": "x", "mode": mode}), 400, "bad_request")


@pytest.mark.parametrize("mode", ["semantic", "hybrid"])
@pytest.mark.parametrize("limit", [1, 2, 3, 5, 1000])
def test_ranked_search_ranks_only_what_the_caller_sees_at_any_limit(
    matrix, viewer_api, admin_api, mode, limit
):
    for role, client in matrix.items():
        keys = [e["key"] for e in search(client, mode=mode, limit=limit).json()]
        # visibility before ranking: never another's entry, and the list is never short
        assert set(keys) <= SEEN[role], (role, keys)
        assert len(keys) == min(limit, len(SEEN[role])), (role, keys)
        assert len(set(keys)) == len(keys)
        if limit >= len(SEEN[role]):
            assert set(keys) == SEEN[role]
    for client in (viewer_api, admin_api):
        keys = [e["key"] for e in search(client, mode=mode, limit=limit).json()]
        assert len(keys) == min(limit, len(ENTRIES))
        if limit == 1000:
            assert set(keys) == set(ENTRIES)


@pytest.mark.parametrize("mode", ["semantic", "hybrid"])
def test_ranked_search_keeps_category_and_group_context(matrix, put, mode):
    keys = {e["key"] for e in search(matrix["c"], mode=mode, groupId="team").json()}
    assert keys == {"food_team", "food_global", "car_global"}
    assert search(matrix["a"], mode=mode, category="no-such-category").json() == []


def test_ranked_search_order_is_deterministic(matrix):
    first = search(matrix["a"], mode="hybrid").json()
    assert search(matrix["a"], mode="hybrid").json() == first


def test_ranked_search_has_bounded_queries(matrix, django_assert_max_num_queries):
    matrix["a"].get("/v1/agents/me")  # the key's first use records last_used_at
    # auth (1) + the one search statement (visibility, both rankings and fusion) (1)
    for mode in ("semantic", "hybrid"):
        with django_assert_max_num_queries(2):
            search(matrix["a"], mode=mode)


@pytest.mark.parametrize("provider", ["openai", "none"])
def test_an_embedder_down_answers_by_full_text_and_says_so(agent_a_api, put, provider):
    put(agent_a_api, userId=U, key="food", value="spicy ramen")
    put(agent_a_api, userId=U, key="car", value="a red Volvo")
    with embedder_down(provider):
        for mode in ("semantic", "hybrid"):
            before = fallbacks(mode)
            response = search(agent_a_api, q="ramen for dinner", mode=mode)
            assert response.headers["X-Search-Fallback"] == "fulltext"
            assert [e["key"] for e in response.json()] == ["food"]
            assert fallbacks(mode) == before + 1


def test_a_trickling_embedder_answers_by_full_text_at_embeddings_timeout(agent_a_api, put):
    put(agent_a_api, userId=U, key="food", value="spicy ramen")
    with scripted_embedder(timeout=1) as script:
        # A byte every 0.9 s: each read within the 1 s timeout; the whole answer would take over a minute.
        script.trickle = 0.9
        started = time.monotonic()
        response = search(agent_a_api, q="ramen for dinner", mode="hybrid")
        elapsed = time.monotonic() - started
    assert len(script.requests) == 1
    assert response.headers["X-Search-Fallback"] == "fulltext"
    assert [e["key"] for e in response.json()] == ["food"]
    answer = {"object": "list", "data": [{"object": "embedding", "index": 0, "embedding": [0.6, 0.8, 0.0]}]}
    assert elapsed < 0.9 * len(json.dumps(answer))  # it did not wait for the trickle to end


def test_full_text_drops_a_questions_stop_words(agent_a_api, put):
    # No vectors: full text alone. "what", "is", "the" match nothing, so the entry that holds them all does
    # not outrank the one with the question's only content word.
    put(agent_a_api, userId=U, key="filler", value="what is the the the thing")
    put(agent_a_api, userId=U, key="pet", value="the dog is called Rex")
    assert [e["key"] for e in search(agent_a_api, q="What is the dog's name?", mode="hybrid").json()] == [
        "pet"
    ]
    assert search(agent_a_api, q="what is the", mode="hybrid").json() == []


def test_a_language_configuration_stems_words(agent_a_api, put):
    put(agent_a_api, userId=U, key="sport", value="she runs marathons")
    with override_settings(SEARCH_LANGUAGE="english"), embedder_down("none"):
        found = search(agent_a_api, q="Who is running a marathon?", mode="hybrid")
    assert found.headers["X-Search-Fallback"] == "fulltext"
    assert [e["key"] for e in found.json()] == ["sport"]
    with embedder_down("none"):  # the default configuration keeps words as written
        assert search(agent_a_api, q="Who is running a marathon?", mode="hybrid").json() == []


# A user's store where one fact is near every question about the user (their devices): asked in words no fact
# holds, the embedder put it a little above the fact that answers. Written for this test.
HUB_STORE = {
    "job": "backend developer, writes Python and Rust",
    "devices": "uses a Fedora laptop and a Pixel phone",
    "home": "lives on a canal boat in Utrecht",
    "diet": "eats no pork, loves lentil soup",
    "sport": "plays water polo on Tuesday evenings",
    "sister": "her sister Noor is a midwife",
    "goal": "saving up for a sabbatical in Japan",
}


def hub_store_first(client, question):
    found = search(client, q=question, mode="hybrid", minScore=0).json()
    assert {e["key"] for e in found} == set(HUB_STORE)
    return found[0]["key"]


def test_a_fact_near_every_question_no_longer_outranks_the_answer(
    agent_a_api, put, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        for key, value in HUB_STORE.items():
            assert put(agent_a_api, userId=U, key=key, value=value).status_code == 201
    model = get_embedder().model_id
    undiscounted = relevance.CALIBRATIONS[model]._replace(hub_discount=0.0)
    with override_settings(SEARCH_CALIBRATION=json.dumps(undiscounted._asdict())):
        assert hub_store_first(agent_a_api, "is the user athletic") == "devices"  # the hub fact, before
    # the query less the generic question's direction: what it asks in particular
    assert relevance.CALIBRATIONS[model].hub_discount > 0
    assert hub_store_first(agent_a_api, "is the user athletic") == "sport"
    for question, answer in [("which phone does she have", "devices"), ("what can't she eat", "diet")]:
        assert hub_store_first(agent_a_api, question) == answer
