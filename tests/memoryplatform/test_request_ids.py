"""Every answer carries an X-Request-Id (the request's own when it is a plain token); log lines name it; a 4xx
is logged once."""

import io
import logging
from collections.abc import Iterator

import pytest
from prometheus_client import REGISTRY

from memoryplatform.requestid import RequestIdFilter
from tests.helpers import assert_envelope


@pytest.fixture
def log_output() -> Iterator[io.StringIO]:
    """What the console handler (settings.LOGGING) writes, while the test runs."""
    handler = next(
        h for h in logging.getLogger().handlers if any(isinstance(f, RequestIdFilter) for f in h.filters)
    )
    output = io.StringIO()
    previous = handler.setStream(output)  # type: ignore[attr-defined]  # a StreamHandler
    try:
        yield output
    finally:
        handler.setStream(previous)  # type: ignore[attr-defined]


def test_an_answer_carries_the_request_id_sent_and_the_log_names_it(agent_a_api, log_output):
    response = agent_a_api.get("/v1/agents/me", HTTP_X_REQUEST_ID="trace-1.a:b")
    assert response.status_code == 200
    assert response["X-Request-Id"] == "trace-1.a:b"
    assert "[trace-1.a:b] memoryplatform.requests GET /v1/agents/me 200" in log_output.getvalue()


@pytest.mark.parametrize("sent", [None, "two words", "x" * 129, "line\u2028break"])
def test_an_id_that_is_not_a_plain_token_is_replaced(agent_a_api, sent):
    headers = {} if sent is None else {"HTTP_X_REQUEST_ID": sent}
    response = agent_a_api.get("/v1/agents/me", **headers)
    assert response["X-Request-Id"] != sent
    assert len(response["X-Request-Id"]) == 32


def test_a_4xx_is_logged_once_with_its_id(agent_a_api, anon_api, log_output):
    assert_envelope(agent_a_api.get("/v1/no-such-thing", HTTP_X_REQUEST_ID="lost-1"), 404, "not_found")
    assert_envelope(anon_api.get("/v1/agents/me", HTTP_X_REQUEST_ID="anon-1"), 401, "unauthorized")
    response = agent_a_api.put("/usermemorystore/memories", {"userId": "u"}, format="json")
    assert response.status_code == 400 and response["X-Request-Id"]
    lines = log_output.getvalue().splitlines()
    (lost,) = [line for line in lines if "[lost-1]" in line]
    assert "GET (no route) 404" in lost and "no-such-thing" not in lost  # a path may hold a user id
    assert len([line for line in lines if "[anon-1]" in line]) == 1
    assert len([line for line in lines if "/usermemorystore/memories" in line]) == 1


def _count(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_upserts_searches_and_recalls_are_counted(agent_a_api, django_capture_on_commit_callbacks):
    created, updated = (
        _count("memory_upserts_total", result="created"),
        _count("memory_upserts_total", result="updated"),
    )
    body = {"userId": "u", "key": "lang", "value": "German", "visibility": "global"}
    for status in (201, 200):
        with django_capture_on_commit_callbacks(execute=True):  # upserts are counted once committed
            assert agent_a_api.put("/usermemorystore/memories", body, format="json").status_code == status
    assert _count("memory_upserts_total", result="created") == created + 1
    assert _count("memory_upserts_total", result="updated") == updated + 1

    keyword, hybrid = (
        _count("memory_searches_total", mode="keyword"),
        _count("memory_searches_total", mode="hybrid"),
    )
    assert agent_a_api.get("/usermemorystore/memories/u/search", {"q": "German"}).status_code == 200
    assert (
        agent_a_api.get("/usermemorystore/memories/u/search", {"q": "German", "mode": "hybrid"}).status_code
        == 200
    )
    assert _count("memory_searches_total", mode="keyword") == keyword + 1
    assert _count("memory_searches_total", mode="hybrid") == hybrid + 1

    recent, relevance = (
        _count("memory_recalls_total", kind="most_recent"),
        _count("memory_recalls_total", kind="relevance"),
    )
    assert agent_a_api.get("/usermemorystore/memories/u/visible").status_code == 200
    assert agent_a_api.get("/usermemorystore/memories/u/visible", {"q": "language"}).status_code == 200
    assert _count("memory_recalls_total", kind="most_recent") == recent + 1
    assert _count("memory_recalls_total", kind="relevance") == relevance + 1
