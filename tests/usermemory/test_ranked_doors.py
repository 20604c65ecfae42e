"""Recall by relevance at every door but MCP (``test_mcp_ranked.py``): ``/visible?q=``, a conversation's
``/context?q=`` and the ``searchMemory`` LLM tool, with the role keys. Only the reader's visible entries take
part, at any limit; the entries returned, and only they, have their access marked as a recall marks it; full
text answers when the embedder is down, and says so; the searchMemory tool says which step fell back (the
embedder's, or only the reranker's)."""

import pytest

from agenttools.tools import FULLTEXT_NOTE, UNRERANKED_NOTE
from tests.conversations.utils import create
from tests.helpers import assert_envelope
from tests.rerank_server import scripted_reranker
from tests.usermemory.ranked import BASE, LIMITS, QUESTION, SEEN, U, embedder_down, fallbacks
from usermemory.models import MemoryEntry

VISIBLE = f"{BASE}/{U}/visible"
# A reader: an agent key (a, b, c) reads as itself; a viewer or admin key names the agent it reads for.
READERS = ["a", "b", "c", "viewer as a", "viewer as b", "admin as c", "admin as b"]


def keys(entries):
    return [e["key"] for e in entries]


def visible(client, **params):
    response = client.get(VISIBLE, params)
    assert response.status_code == 200, response.content
    return response


def reader(name, matrix, viewer_api, admin_api):
    """(client, the params naming the agent, the agent's role in SEEN) of a reader of READERS."""
    if name in matrix:
        return matrix[name], {}, name
    key, _, role = name.split()
    return {"viewer": viewer_api, "admin": admin_api}[key], {"agentId": f"agent-{role}"}, role


def assert_only_seen(found, role, limit):
    """Visibility before ranking: nothing the agent may not see, no duplicate, and never a short list."""
    assert set(found) <= SEEN[role], (role, limit, found)
    assert len(found) == len(set(found)) == min(limit, len(SEEN[role])), (role, limit, found)


def assert_best_first(entries):
    scores = [e["score"] for e in entries]
    assert all(isinstance(s, float) for s in scores) and scores == sorted(scores, reverse=True)


def agent_of(matrix, role):
    return matrix[role].agent


# --- /visible?q= -------------------------------------------------------------------------------------


def test_a_write_is_recalled_by_meaning_at_once(agent_a_api, put, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):  # the request's own after-commit embedding
        for key, value in [("car", "a red Volvo estate"), ("food", "spicy ramen"), ("pet", "a cat, Miso")]:
            assert put(agent_a_api, userId=U, key=key, value=value).status_code == 201
    for mode in ("hybrid", "semantic"):
        response = visible(agent_a_api, q=QUESTION, mode=mode)
        assert "X-Search-Fallback" not in response.headers
        assert keys(response.json())[0] == "food"
        assert_best_first(response.json())
    assert keys(visible(agent_a_api, q=QUESTION).json())[0] == "food"  # hybrid by default
    plain = visible(agent_a_api).json()  # without q: the recall order, unchanged, with no score
    assert keys(plain) == ["pet", "food", "car"] and "score" not in plain[0]


@pytest.mark.parametrize("mode", ["semantic", "hybrid"])
@pytest.mark.parametrize("name", READERS)
def test_visible_q_recalls_only_what_the_agent_sees_at_any_limit(matrix, viewer_api, admin_api, name, mode):
    client, agent, role = reader(name, matrix, viewer_api, admin_api)
    for limit in LIMITS:
        found = visible(client, q=QUESTION, mode=mode, limit=limit, **agent).json()
        assert_only_seen(keys(found), role, limit)
        assert_best_first(found)


@pytest.mark.parametrize("mode", ["semantic", "hybrid"])
def test_visible_q_keeps_the_group_context(matrix, mode):
    assert set(keys(visible(matrix["c"], q=QUESTION, mode=mode, groupId="team").json())) == SEEN["c"]
    found = keys(visible(matrix["a"], q=QUESTION, mode=mode, groupId="team").json())
    assert set(found) == SEEN["a"]
    assert_envelope(matrix["b"].get(VISIBLE, {"q": QUESTION, "groupId": "team"}), 403, "forbidden")


@pytest.mark.parametrize(
    ("policy_order", "order", "counted"),
    [
        ("most_accessed", None, True),
        ("most_recent", None, False),  # EDDI: most_recent moves lastAccessedAt alone
        ("most_recent", "most_accessed", True),  # the order asked for decides, as in a recall
    ],
)
def test_visible_q_marks_the_access_of_what_it_returns_only(matrix, set_policy, policy_order, order, counted):
    set_policy(agent_of(matrix, "a"), recall_order=policy_order, max_recall_entries=2)
    before = dict(MemoryEntry.objects.filter(user_id=U).values_list("key", "access_count"))
    params = {"order": order} if order else {}
    body = visible(matrix["a"], q=QUESTION, limit=5, **params).json()  # at most the policy's 2
    returned = keys(body)
    assert len(returned) == 2 and set(returned) <= SEEN["a"]
    after = dict(MemoryEntry.objects.filter(user_id=U).values_list("key", "access_count"))
    accessed = MemoryEntry.objects.filter(user_id=U, last_accessed_at__isnull=False)
    assert set(accessed.values_list("key", flat=True)) == set(returned)
    assert all(e["lastAccessedAt"] for e in body)
    if counted:
        assert {k for k in after if after[k] != before[k]} == set(returned)
        assert all(after[k] == before[k] + 1 for k in returned)
        assert all(e["accessCount"] == before[e["key"]] + 1 for e in body)
    else:
        assert after == before


def test_visible_q_is_one_statement_after_the_key(matrix, django_assert_max_num_queries):
    matrix["a"].get("/v1/agents/me")  # the key's first use records last_used_at
    # auth (1) + the recall lock and the ranked UPDATE .. RETURNING, one query string (1)
    for mode in ("semantic", "hybrid"):
        with django_assert_max_num_queries(2):
            visible(matrix["a"], q=QUESTION, mode=mode)


@pytest.mark.parametrize(
    "params",
    [
        {"q": ""},
        {"q": "", "mode": "hybrid"},
        {"mode": "semantic"},
        {"q": "x", "mode": "keyword"},
        {"q": "x", "mode": "fuzzy"},
        {"q": "x", "limit": "0"},
        {"q": "x", "limit": "1001"},
        {"q": "x", "limit": "ten"},
        {"q": "x", "order": "best"},
        {"q": "x" * 1001},
    ],
)
def test_bad_visible_q_input_is_a_400_in_the_envelope(agent_a_api, params):
    assert_envelope(agent_a_api.get(VISIBLE, params), 400, "bad_request")


def test_visible_q_needs_the_agent_with_a_viewer_key(viewer_api, agent_a):
    assert_envelope(viewer_api.get(VISIBLE, {"q": QUESTION}), 400, "bad_request")
    assert_envelope(viewer_api.get(VISIBLE, {"q": QUESTION, "agentId": "nobody"}), 404, "not_found")


@pytest.mark.parametrize("provider", ["openai", "none"])
def test_the_embedder_down_recalls_by_full_text_and_says_so(agent_a_api, put, provider):
    put(agent_a_api, userId=U, key="food", value="spicy ramen")
    put(agent_a_api, userId=U, key="car", value="a red Volvo")
    conversation = create(agent_a_api, user_id=U)
    with embedder_down(provider):
        for mode in ("semantic", "hybrid"):
            before = fallbacks(mode)
            response = visible(agent_a_api, q="ramen for dinner", mode=mode)
            assert response.headers["X-Search-Fallback"] == "fulltext"
            assert keys(response.json()) == ["food"]
            assert fallbacks(mode) == before + 1
        response = agent_a_api.get(f"/v1/conversations/{conversation}/context", {"q": "ramen for dinner"})
        assert response.status_code == 200, response.content
        assert response.headers["X-Search-Fallback"] == "fulltext"
        assert keys(response.json()["userMemories"]) == ["food"]
        result = agent_a_api.post(
            "/v1/tools/searchMemory/invoke",
            {"userId": U, "arguments": {"query": "ramen for dinner"}},
            format="json",
        ).json()["result"]
        assert result == f"{FULLTEXT_NOTE}\n  • food = spicy ramen [fact, self]"
    plain = visible(agent_a_api, q="ramen for dinner")  # the embedder back: no header
    assert "X-Search-Fallback" not in plain.headers


# --- /v1/conversations/{id}/context?q= ---------------------------------------------------------------


def context(client, conversation, **params):
    response = client.get(f"/v1/conversations/{conversation}/context", params)
    assert response.status_code == 200, response.content
    return response


@pytest.mark.parametrize("name", READERS)
def test_context_q_recalls_only_what_the_agent_sees_within_its_limit(
    matrix, viewer_api, admin_api, set_policy, name
):
    client, agent, role = reader(name, matrix, viewer_api, admin_api)
    conversation = create(matrix["a"], user_id=U)  # no group: every agent may take part
    for limit in LIMITS:
        set_policy(agent_of(matrix, role), max_recall_entries=limit)
        response = context(client, conversation, q=QUESTION, **agent)
        assert "X-Search-Fallback" not in response.headers
        assert_only_seen(keys(response.json()["userMemories"]), role, limit)
        assert_best_first(response.json()["userMemories"])


def test_context_q_in_a_group_conversation_and_without_q(matrix, put):
    conversation = create(matrix["c"], user_id=U, groupId="team")
    ranked = context(matrix["c"], conversation, q="pizza").json()["userMemories"]
    assert keys(ranked)[0] == "food_team" and set(keys(ranked)) == SEEN["c"]
    assert_best_first(ranked)
    plain = context(matrix["c"], conversation).json()["userMemories"]  # the recall order, no score
    assert keys(plain) == ["car_global", "food_global", "food_team"] and "score" not in plain[0]


def test_bad_context_q_is_a_400_in_the_envelope(agent_a_api):
    conversation = create(agent_a_api, user_id=U)
    path = f"/v1/conversations/{conversation}/context"
    assert_envelope(agent_a_api.get(path, {"q": ""}), 400, "bad_request")
    assert_envelope(agent_a_api.get(path, {"q": "x" * 1001}), 400, "bad_request")


# --- The searchMemory LLM tool -----------------------------------------------------------------------


def search_tool(client, **arguments):
    response = client.post(
        "/v1/tools/searchMemory/invoke", {"userId": U, "arguments": arguments}, format="json"
    )
    assert response.status_code == 200, response.content
    return response.json()["result"]


def tool_keys(result):
    """The keys of the tool's ``  • key = value [category, visibility]`` lines."""
    return [line.removeprefix("  • ").split(" = ")[0] for line in result.splitlines()]


@pytest.mark.parametrize("mode", ["semantic", "hybrid", None])
@pytest.mark.parametrize("role", ["a", "b", "c"])
def test_search_tool_finds_only_what_the_agent_sees_at_any_limit(matrix, set_policy, role, mode):
    for limit in LIMITS:  # the tool returns at most the agent's maxRecallEntries
        set_policy(agent_of(matrix, role), max_recall_entries=limit)
        result = search_tool(matrix[role], query=QUESTION, **({"mode": mode} if mode else {}))
        assert FULLTEXT_NOTE not in result
        assert_only_seen(tool_keys(result), role, limit)


def test_search_tool_finds_by_meaning(matrix):
    assert tool_keys(search_tool(matrix["c"], query="what does the user drive?"))[0] == "car_global"
    assert tool_keys(search_tool(matrix["c"], query="what does the user drive?", mode="semantic"))[0] == (
        "car_global"
    )
    # keyword: EDDI's literal match, which a question does not meet
    assert search_tool(matrix["c"], query=QUESTION, mode="keyword") == (
        f"No memories found matching '{QUESTION}'."
    )


@pytest.mark.parametrize("mode", ["hybrid", "semantic"])
def test_search_tool_with_the_reranker_down_says_so_not_that_meaning_is_unavailable(matrix, mode):
    with scripted_reranker(Volvo=0.97) as script:
        reranked = search_tool(matrix["b"], query=QUESTION, mode=mode)
        script.fail_with = 503
        result = search_tool(matrix["b"], query=QUESTION, mode=mode)
    assert tool_keys(reranked)[0] == "car_global"  # the reranker up: its order, and no note
    assert UNRERANKED_NOTE not in reranked and FULLTEXT_NOTE not in reranked
    note, _, found = result.partition("\n")
    assert note == UNRERANKED_NOTE  # the embedder answered: searched by meaning, ranked without the reranker
    assert FULLTEXT_NOTE not in result
    assert set(tool_keys(found)) == SEEN["b"]


def test_search_tool_with_the_embedder_and_the_reranker_down_says_both(matrix):
    with embedder_down(), scripted_reranker(Volvo=0.97) as script:
        script.fail_with = 503
        result = search_tool(matrix["b"], query="tacos every week")
    assert result.splitlines()[:2] == [FULLTEXT_NOTE, UNRERANKED_NOTE]
    assert tool_keys("\n".join(result.splitlines()[2:])) == ["food_bteam"]
