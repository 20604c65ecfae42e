"""One limit for queries at every REST door, and an embedder that never sees more than EMBEDDINGS_MAX_CHARS
(issue 33, finding 2). The LLM tools' and MCP's doors: ``tests/agenttools/test_query_limits.py``; the
client's: ``tests/client/test_client_limits.py``."""

import pytest
from django.core.management import call_command
from django.test import override_settings

from memoryplatform.text import MAX_QUERY_CHARS
from tests.conversations.utils import create
from tests.embedding_server import inputs, scripted_embedder
from tests.helpers import assert_envelope

BASE = "/usermemorystore/memories"
U = "user-limits"
TOO_LONG = "what does the user eat? " * (MAX_QUERY_CHARS // 24 + 1)  # just over the limit
AT_LIMIT = ("a question about food " * MAX_QUERY_CHARS)[:MAX_QUERY_CHARS]


def _rest_reads(agent_a_api, admin_api):
    """Every REST read that takes a free-text query: (client, path, params without q)."""
    conversation = create(agent_a_api, U)
    return [
        (agent_a_api, f"{BASE}/{U}/search", {}),
        (agent_a_api, f"{BASE}/{U}/search", {"mode": "hybrid"}),
        (agent_a_api, f"{BASE}/{U}/search", {"mode": "semantic"}),
        (admin_api, "/v1/memories/search", {}),  # full text only: it takes no mode
        (agent_a_api, f"{BASE}/{U}/visible", {}),
        (agent_a_api, f"{BASE}/{U}/visible", {"mode": "semantic"}),
        (agent_a_api, f"/v1/conversations/{conversation}/context", {}),
        (agent_a_api, "/v1/conversations/search", {}),
    ]


def test_every_rest_query_over_the_limit_is_a_400_and_nothing_is_embedded(agent_a_api, admin_api):
    with scripted_embedder() as script:
        for client, path, params in _rest_reads(agent_a_api, admin_api):
            body = assert_envelope(client.get(path, {**params, "q": TOO_LONG}), 400, "bad_request")
            assert f"no more than {MAX_QUERY_CHARS} characters" in body["error"], (path, body)
            assert TOO_LONG[:100] not in str(body)  # the query is not echoed back
        assert script.requests == []  # refused before anything reached the embedder
        for client, path, params in _rest_reads(agent_a_api, admin_api):
            response = client.get(path, {**params, "q": AT_LIMIT})
            assert response.status_code == 200, (path, response.content[:300])


EXPANDING = "\ufdfa"  # one character, 18 once normalized (NFKC)


def test_every_rest_query_is_bounded_as_normalized_so_expanding_characters_cost_no_more(
    agent_a_api, admin_api
):
    """Issue 53, finding 12: 1,000 characters of U+FDFA passed the limit and were 18,000 to normalize,
    keyword-match and embed (450 tokens, twice English's 218). The limit counts the query as a search
    reads it, NFKC and casefolded: 56 of them (1,008) are a 400 at every read, before the embedder; 55 (990)
    pass."""
    over, at_limit = EXPANDING * 56, EXPANDING * 55
    with scripted_embedder() as script:
        for client, path, params in _rest_reads(agent_a_api, admin_api):
            body = assert_envelope(client.get(path, {**params, "q": over}), 400, "bad_request")
            assert body["error"] == (
                f"q is 56 characters but 1008 once normalized (NFKC) and casefolded; a query may have at "
                f"most {MAX_QUERY_CHARS}, counted either way."
            ), path
            assert body["details"] == {"limit": "MAX_QUERY_CHARS", "max": MAX_QUERY_CHARS}
        assert script.requests == []  # refused before anything reached the embedder
        for client, path, params in _rest_reads(agent_a_api, admin_api):
            response = client.get(path, {**params, "q": at_limit})
            assert response.status_code == 200, (path, response.content[:300])
        assert script.requests != []  # the ranked reads embedded the query within the limit


def test_the_openapi_schema_states_the_limit_of_every_query(admin_api):
    schema = admin_api.get("/api/schema/", {"format": "json"}).json()
    paths = [
        f"{BASE}/{{user_id}}/search",
        f"{BASE}/{{user_id}}/visible",
        "/v1/memories/search",
        "/v1/conversations/{conversation_id}/context",
        "/v1/conversations/search",
    ]
    for path in paths:
        (q,) = [p for p in schema["paths"][path]["get"]["parameters"] if p["name"] == "q"]
        assert q["schema"]["maxLength"] == MAX_QUERY_CHARS, path


@override_settings(EMBEDDINGS_MAX_CHARS=100)
def test_the_embedder_never_sees_more_than_embeddings_max_chars(agent_a_api, put):
    """Through the doors: a query at the limit, the searchMemory tool's, and an entry ten times as long
    (embedded from its head, as ``manage.py embed --missing`` does after a write)."""
    value = "The user told a long story about the trip to the Alentejo, village by village. " * 4
    with scripted_embedder() as script:
        assert put(agent_a_api, userId=U, key="trip", value=value).status_code == 201
        call_command("embed", "--missing", "--no-progress")
        response = agent_a_api.get(f"{BASE}/{U}/visible", {"q": AT_LIMIT, "mode": "semantic"})
        assert response.status_code == 200 and "X-Search-Fallback" not in response.headers
        assert [e["key"] for e in response.json()] == ["trip"]  # the entry's vector was stored and found
        tool = agent_a_api.post(
            "/v1/tools/searchMemory/invoke",
            {"userId": U, "arguments": {"query": AT_LIMIT, "mode": "semantic"}},
            format="json",
        )
        assert tool.status_code == 200 and "trip" in tool.json()["result"]
    sent = inputs(script)
    assert f"trip: {value}"[:100] in sent  # the entry's head
    assert sent.count(AT_LIMIT[:100]) == 2  # the two queries' heads
    assert max(len(text) for text in sent) == 100


@pytest.mark.parametrize("max_chars", [0, -5])
def test_a_system_check_refuses_an_embeddings_max_chars_below_one(max_chars):
    from django.core.management import CommandError

    with override_settings(EMBEDDINGS_MAX_CHARS=max_chars), pytest.raises(CommandError, match="E010"):
        call_command("check")
