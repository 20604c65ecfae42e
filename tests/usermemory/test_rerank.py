"""The second stage (``RERANK_PROVIDER=http``, a scripted rerank server): the reranker's probability is the
score and its order the order, at every ranked door; only the caller's visible entries reach it; the
reranker down answers with the first stage and says so, never a 5xx."""

import json
import time

import pytest

from tests.helpers import assert_envelope
from tests.rerank_server import scripted_reranker
from tests.usermemory.ranked import BASE, QUESTION, SEEN, U

SEARCH = f"{BASE}/{U}/search"
VISIBLE = f"{BASE}/{U}/visible"


def keys(entries):
    return [e["key"] for e in entries]


@pytest.mark.parametrize("tei", [False, True])
def test_the_reranker_orders_and_scores(matrix, tei):
    with scripted_reranker(Volvo=0.97, tacos=0.6) as script:
        script.tei = tei
        found = matrix["b"].get(SEARCH, {"q": QUESTION, "mode": "hybrid", "minScore": 0}).json()
    assert keys(found)[:2] == ["car_global", "food_bteam"]
    assert [e["score"] for e in found[:2]] == [0.97, 0.6]
    assert set(keys(found)) == SEEN["b"]
    sent = script.requests[0]
    assert sent["query"] == QUESTION
    # only what b may read reached the reranker, as "key: value"
    assert {d.split(":")[0] for d in sent["documents"]} == SEEN["b"]
    assert "car_global: drives a Volvo" in sent["documents"]


def test_min_score_applies_to_the_rerankers_score(matrix):
    with scripted_reranker(Volvo=0.97, tacos=0.6):
        found = matrix["b"].get(SEARCH, {"q": QUESTION, "mode": "hybrid", "minScore": 0.5}).json()
        recalled = matrix["b"].get(VISIBLE, {"q": QUESTION, "minScore": 0.9}).json()
    assert keys(found) == ["car_global", "food_bteam"]
    assert keys(recalled) == ["car_global"]


def test_a_recall_marks_only_what_the_reranker_chose(matrix):
    from usermemory.models import MemoryEntry

    with scripted_reranker(Volvo=0.97):
        recalled = matrix["b"].get(VISIBLE, {"q": QUESTION, "minScore": 0.5}).json()
    assert keys(recalled) == ["car_global"]
    marked = set(
        MemoryEntry.objects.filter(user_id=U, last_accessed_at__isnull=False).values_list("key", flat=True)
    )
    assert marked == {"car_global"}


@pytest.mark.parametrize("fail_with", [500, 503])
def test_the_reranker_down_answers_with_the_first_stage(matrix, fail_with):
    with scripted_reranker(Volvo=0.97) as script:
        script.fail_with = fail_with
        response = matrix["b"].get(SEARCH, {"q": QUESTION, "mode": "hybrid", "minScore": 0})
        recall = matrix["b"].get(VISIBLE, {"q": QUESTION, "minScore": 0})
    for answer in (response, recall):
        assert answer.status_code == 200
        assert answer.headers["X-Search-Fallback"] == "unreranked"
        assert set(keys(answer.json())) == SEEN["b"]


def test_a_reranker_answer_of_the_wrong_shape_is_a_fallback(matrix):
    with scripted_reranker(Volvo=7.5):  # a raw logit, not a probability
        response = matrix["b"].get(SEARCH, {"q": QUESTION, "mode": "hybrid"})
    assert response.status_code == 200 and response.headers["X-Search-Fallback"] == "unreranked"


def _results(index: str, score: str) -> bytes:
    """A Cohere answer for b's five documents, the first item's index and score as given (JSON text)."""
    items = [f'{{"index": {index}, "relevance_score": {score}}}'] + [
        json.dumps({"index": i, "relevance_score": 0.5}) for i in range(1, 5)
    ]
    return f'{{"results": [{", ".join(items)}]}}'.encode()


MALFORMED = {
    "deep JSON": b'{"results": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    "deeper than the doors take": b'{"results": ' + b"[" * 100 + b"]" * 100 + b"}",
    "a NaN score": _results("0", "NaN"),
    "an infinite index": _results("1e400", "0.5"),
    "a score as text": _results("0", '"0.9"'),
    "a score too large for a float": _results("0", "1" + "0" * 400),
    "true as an index": _results("true", "0.9"),
    "a key twice": _results("0", "0.9").replace(b'"index": 0,', b'"index": 0, "index": 0,'),
    "not JSON": b"<html>busy</html>",
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_reranker_answer_is_a_fallback_at_every_ranked_read(matrix, case):
    with scripted_reranker(Volvo=0.97) as script:
        script.raw = MALFORMED[case]
        response = matrix["b"].get(SEARCH, {"q": QUESTION, "mode": "hybrid", "minScore": 0})
        recall = matrix["b"].get(VISIBLE, {"q": QUESTION, "minScore": 0})
    assert len(script.requests) == 2  # each read asked the reranker
    for answer in (response, recall):
        assert answer.status_code == 200, answer.content
        assert answer.headers["X-Search-Fallback"] == "unreranked"
        assert set(keys(answer.json())) == SEEN["b"]


def test_a_reranker_answer_over_the_size_limit_is_a_fallback(matrix):
    from memoryplatform.httpjson import MAX_ANSWER_BYTES
    from memoryplatform.rerank import RerankerError
    from memoryplatform.rerank.http import HttpReranker

    valid = _results("0", "0.9")
    padded = valid[:-1] + b', "pad": "' + b"x" * MAX_ANSWER_BYTES + b'"}'
    with scripted_reranker(Volvo=0.97) as script:
        script.raw = valid
        assert "X-Search-Fallback" not in matrix["b"].get(SEARCH, {"q": QUESTION, "mode": "hybrid"}).headers
        script.raw = padded  # the same scores, in an answer too large to read
        response = matrix["b"].get(SEARCH, {"q": QUESTION, "mode": "hybrid"})
        # why, as the client says it (the log names the error's type only: it may quote what was sent)
        with pytest.raises(RerankerError, match=f"an answer larger than {MAX_ANSWER_BYTES} bytes"):
            HttpReranker(url=script.url, timeout=30).scores(QUESTION, ["a"])
    assert response.status_code == 200 and response.headers["X-Search-Fallback"] == "unreranked"


def test_a_trickling_reranker_is_cut_at_rerank_timeout(matrix):
    # A byte every 0.9 s: every read arrives within the 1 s timeout, the whole answer (over 200 bytes) would
    # take minutes. RERANK_TIMEOUT bounds the whole call, so each read answers without the reranker.
    with scripted_reranker(timeout=1, Volvo=0.97) as script:
        script.trickle = 0.9
        started = time.monotonic()
        response = matrix["b"].get(SEARCH, {"q": QUESTION, "mode": "hybrid", "minScore": 0})
        recall = matrix["b"].get(VISIBLE, {"q": QUESTION, "minScore": 0})
        elapsed = time.monotonic() - started
    assert len(script.requests) == 2
    for answer in (response, recall):
        assert answer.status_code == 200, answer.content
        assert answer.headers["X-Search-Fallback"] == "unreranked"
        assert set(keys(answer.json())) == SEEN["b"]
    assert elapsed < 0.9 * 200  # not even one read waited for its trickle to end


def test_bad_min_score_is_refused_before_the_reranker(matrix):
    with scripted_reranker(Volvo=0.97) as script:
        assert_envelope(
            matrix["b"].get(SEARCH, {"q": QUESTION, "mode": "hybrid", "minScore": 3}), 400, "bad_request"
        )
    assert script.requests == []
