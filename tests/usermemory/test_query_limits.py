"""One limit for queries at every REST door, and an embedder that never sees more than EMBEDDINGS_MAX_CHARS
(issue 33, finding 2); a query's tokens are bounded too (MAX_QUERY_TOKENS: issue 53, finding 12). The LLM
tools' and MCP's doors: ``tests/agenttools/test_query_limits.py``; the client's:
``tests/client/test_client_limits.py``."""

import pytest
from django.core.management import CommandError, call_command
from django.test import override_settings

from memoryplatform.text import MAX_QUERY_CHARS
from tests.conversations.utils import create
from tests.embedding_server import inputs, scripted_embedder
from tests.helpers import assert_envelope
from tests.queries import CHINESE, ENGLISH, LIGATURES

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


@override_settings(MAX_QUERY_TOKENS=512)  # the characters alone: 55 are 454 tokens by the remote estimate
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
    with override_settings(EMBEDDINGS_MAX_CHARS=max_chars), pytest.raises(CommandError, match="E010"):
        call_command("check")


# --- Tokens (issue 53, finding 12) ------------------------------------------------------------------------
# 500 U+FCDF are 1,000 characters once normalized, within MAX_QUERY_CHARS, yet 1,006 tokens to the local
# model, and 1,000 characters of Chinese over 700, where 1,000 of English are about 225: a query is bounded in
# what its cost follows, the embedder's tokens (MAX_QUERY_TOKENS), refused before anything embeds it.

MAX_TOKENS = 448  # the default of MAX_QUERY_TOKENS


def _refused(response, *, characters: int, tokens: int, most: int = MAX_TOKENS) -> None:
    body = assert_envelope(response, 400, "bad_request")
    assert body["error"] == (
        f"q is {characters} characters but {tokens} tokens as the embedder reads it; a query may have at "
        f"most {most} tokens."
    ), body
    assert body["details"] == {"limit": "MAX_QUERY_TOKENS", "max": most}


def test_the_queries_are_as_long_as_the_character_limit_allows():
    assert len(CHINESE) == len(ENGLISH) == MAX_QUERY_CHARS and len(LIGATURES) == 500


def test_the_local_model_counts_the_tokens_and_every_rest_read_refuses_too_many(agent_a_api, admin_api):
    """The default embedder, the local model, counts with its own tokenizer; the English query, and its
    capitals (more tokens a character), pass at every read."""
    reads = _rest_reads(agent_a_api, admin_api)
    for client, path, params in reads:
        _refused(client.get(path, {**params, "q": LIGATURES}), characters=500, tokens=1006)
        _refused(client.get(path, {**params, "q": CHINESE}), characters=1000, tokens=642)
    for client, path, params in reads:
        for english in (ENGLISH, ENGLISH.upper()):
            response = client.get(path, {**params, "q": english})
            assert response.status_code == 200, (path, response.content[:300])


def test_a_remote_embedder_is_sent_nothing_of_a_refused_query(agent_a_api, admin_api):
    """A remote model's tokens are estimated (four bytes of UTF-8 a token): the scripted server that records
    what it is sent gets none of the refused queries, and the English one at every ranked read."""
    reads = _rest_reads(agent_a_api, admin_api)
    with scripted_embedder() as script:
        for client, path, params in reads:
            _refused(client.get(path, {**params, "q": LIGATURES}), characters=500, tokens=500)
            _refused(client.get(path, {**params, "q": CHINESE}), characters=1000, tokens=718)
        assert script.requests == []  # refused before anything reached the embedder
        for client, path, params in reads:
            response = client.get(path, {**params, "q": ENGLISH})
            assert response.status_code == 200, (path, response.content[:300])
    assert set(inputs(script)) == {ENGLISH}


@override_settings(MAX_QUERY_TOKENS=100)
def test_the_bound_is_the_setting(agent_a_api):
    response = agent_a_api.get(f"/usermemorystore/memories/{U}/search", {"q": ENGLISH, "mode": "hybrid"})
    _refused(response, characters=1000, tokens=226, most=100)


@pytest.mark.parametrize("most", [0, 15])
def test_a_system_check_refuses_a_max_query_tokens_below_16(most):
    with override_settings(MAX_QUERY_TOKENS=most), pytest.raises(CommandError, match="E010"):
        call_command("check")
