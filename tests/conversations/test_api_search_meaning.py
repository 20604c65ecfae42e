"""Messages found by meaning (``semantic``, ``hybrid``) through REST with the real local embedder, within the
visibility rules: the role x visibility matrix in every mode, scores that are probabilities with ``minScore``,
the embedder down answering by full text, and the agent context's relevant messages."""

from collections.abc import Iterator

import pytest

from apikeys.caller import Caller
from conversations import services
from memoryplatform.embeddings import get_embedder
from tests.conversations.utils import create, say, sync
from tests.factories import AgentFactory, AgentGroupFactory
from tests.helpers import assert_envelope
from tests.usermemory.ranked import embedder_down, fallbacks

URL = "/v1/conversations/search"
MODES = ["keyword", "semantic", "hybrid"]


@pytest.fixture(autouse=True)
def fresh_embedder() -> Iterator[None]:
    get_embedder.cache_clear()
    yield
    get_embedder.cache_clear()


@pytest.fixture
def inline(settings, django_capture_on_commit_callbacks):
    """Writes whose vectors are computed in the request, after the commit (the background thread would not
    see the test's transaction)."""
    settings.EMBEDDINGS_INLINE_MAX_CHARS = 2000
    return lambda: django_capture_on_commit_callbacks(execute=True)


@pytest.fixture
def world(agent_a, agent_a_api, agent_b_api, make_api_client, inline):
    """Conversation ``open`` (no group, user-1): history by the user (through A), A and B; each agent's own
    memory stream; a case-log entry by A. Conversation ``team`` (group ``team``: A and C, not B, user-2):
    history by C. Every message is about a refund."""
    agent_c = AgentFactory(id="agent-c")
    AgentGroupFactory(id="team", members=[agent_a, agent_c])
    agent_c_api = make_api_client("agent", agent_c)
    with inline():
        open_id = create(agent_a_api, "user-1")
        say(agent_a_api, open_id, "user: where is my refund", role="user")
        say(agent_a_api, open_id, "A-history: your refund is on its way", role="assistant")
        say(agent_b_api, open_id, "B-history: refund approved", role="assistant")
        say(agent_a_api, open_id, "A-summary: refund approved by B", role="assistant", channel="summary")
        for client, label in ((agent_a_api, "A"), (agent_b_api, "B")):
            assert sync(client, open_id, f"{label}-memory: the user wants a refund").status_code in (200, 201)
        team_id = create(agent_c_api, "user-2", groupId="team")
        say(agent_c_api, team_id, "C-team: refund escalated", role="assistant")
    return {"c": agent_c_api}


def search(client, q="refund", **params):
    response = client.get(URL, {"q": q, **params})
    assert response.status_code == 200, response.content
    return response


def labels(client, q="refund", **params) -> list[str]:
    return sorted(m["content"][0]["text"].split(":")[0] for m in search(client, q, **params).json()["data"])


EVERYTHING = ["A-history", "A-memory", "A-summary", "B-history", "B-memory", "C-team", "user"]
SEEN = {
    "agent_a_api": ["A-history", "A-memory", "A-summary", "B-history", "C-team", "user"],
    "agent_b_api": ["A-history", "A-summary", "B-history", "B-memory", "user"],  # not in team
    "c": ["A-history", "A-summary", "B-history", "C-team", "user"],  # no memory of its own
    "viewer_api": EVERYTHING,
    "admin_api": EVERYTHING,
}


def without_memory(seen: list[str]) -> list[str]:
    return [label for label in seen if not label.endswith("-memory")]


@pytest.mark.parametrize("mode", MODES)
def test_each_key_finds_what_it_may_see_in_every_mode(request, world, mode):
    """Visibility before ranking: never another agent's memory stream or a group it is not in, and nothing
    it may see is missing. Semantic finds no memory stream (it has no vectors); minScore 0 keeps every
    candidate."""
    for who, seen in SEEN.items():
        client = world["c"] if who == "c" else request.getfixturevalue(who)
        params = {"mode": mode} if mode == "keyword" else {"mode": mode, "minScore": 0}
        expected = without_memory(seen) if mode == "semantic" else seen
        assert labels(client, **params) == expected, who
        if mode != "keyword":  # filters in the same statement
            assert labels(client, mode=mode, minScore=0, channel="summary") == ["A-summary"], who
            assert set(labels(client, mode=mode, minScore=0, userId="user-2")) <= {"C-team"}, who


@pytest.mark.parametrize("mode", ["semantic", "hybrid"])
def test_one_agents_messages_never_another_agents_memory(world, agent_a_api, agent_b_api, admin_api, mode):
    at_all = {"mode": mode, "minScore": 0}
    assert labels(agent_a_api, agentId="agent-b", **at_all) == ["B-history"]
    assert labels(agent_b_api, userId="user-2", **at_all) == []
    memory = labels(admin_api, channel="memory", **at_all)
    assert memory == ([] if mode == "semantic" else ["A-memory", "B-memory"])
    assert labels(agent_b_api, channel="memory", **at_all) == ([] if mode == "semantic" else ["B-memory"])


@pytest.fixture
def support(agent_a_api, inline):
    """One user's support chat: the answer turn holds none of the question's words."""
    with inline():
        conversation = create(agent_a_api, "user-9")
        say(agent_a_api, conversation, "Which languages do you speak at home?", role="user")
        say(agent_a_api, conversation, "Portuguese with my mother, English at work.", role="user")
        say(agent_a_api, conversation, "I drive a red Volvo estate.", role="user")
        say(agent_a_api, conversation, "My cat Miso sleeps all day.", role="user")
    return conversation


@pytest.mark.parametrize("mode", ["semantic", "hybrid"])
def test_a_message_is_found_by_meaning_with_a_probability(
    agent_a_api, support, mode, django_assert_max_num_queries
):
    question = "does the user know Portuguese?"
    agent_a_api.get("/v1/agents/me")  # the key's first use records last_used_at
    with django_assert_max_num_queries(3):  # the key, the ranking, the messages
        response = search(agent_a_api, question, mode=mode)
    assert "X-Search-Fallback" not in response.headers
    found = response.json()["data"]
    assert found[0]["content"][0]["text"] == "Portuguese with my mother, English at work."
    scores = [m["score"] for m in found]
    assert all(0.0 <= s <= 1.0 for s in scores) and scores == sorted(scores, reverse=True)
    assert found[0]["userId"] == "user-9" and found[0]["conversationId"] == support
    # By meaning alone: no word of the question in the answer, and keyword search does not find it.
    assert search(agent_a_api, "which tongue does the user talk?", mode="keyword").json()["data"] == []
    by_meaning = search(agent_a_api, "which tongue does the user talk?", mode=mode).json()["data"]
    assert "Portuguese" in by_meaning[0]["content"][0]["text"]


def test_min_score_leaves_out_what_is_less_relevant(agent_a_api, support):
    question = "which car does the user drive?"
    every = search(agent_a_api, question, mode="hybrid", minScore=0).json()["data"]
    assert every[0]["content"][0]["text"] == "I drive a red Volvo estate."
    assert len(every) == 4
    cut = (every[0]["score"] + every[1]["score"]) / 2
    kept = search(agent_a_api, question, mode="hybrid", minScore=cut).json()["data"]
    assert [m["id"] for m in kept] == [every[0]["id"]]
    assert search(agent_a_api, question, mode="hybrid", minScore=1).json()["data"] == []


@pytest.mark.parametrize(
    "params",
    [
        {"mode": "fuzzy"},
        {"mode": "KEYWORD"},
        {"mode": "hybrid", "minScore": 1.5},
        {"mode": "hybrid", "minScore": -0.1},
        {"mode": "hybrid", "minScore": "nan"},
        {"mode": "hybrid", "minScore": "high"},
        {"minScore": 0.5},  # keyword does not score
        {"mode": "hybrid", "q": ""},
    ],
)
def test_bad_modes_and_min_scores_are_a_400(agent_a_api, params):
    assert_envelope(agent_a_api.get(URL, {"q": "x", **params}), 400, "bad_request")


@pytest.mark.parametrize("provider", ["openai", "none"])
def test_the_embedder_down_answers_by_full_text_and_says_so(agent_a_api, support, provider):
    with embedder_down(provider):
        for mode in ("semantic", "hybrid"):
            before = fallbacks(mode)
            response = search(agent_a_api, "Portuguese at home", mode=mode, minScore=0)
            assert response.headers["X-Search-Fallback"] == "fulltext"
            texts = [m["content"][0]["text"] for m in response.json()["data"]]
            assert set(texts) == {
                "Which languages do you speak at home?",
                "Portuguese with my mother, English at work.",
            }
            assert all(0 <= m["score"] <= 1 for m in response.json()["data"])
            assert fallbacks(mode) == before + 1


def test_scores_depend_only_on_what_the_caller_may_see(agent_a, agent_a_api, agent_b_api, inline):
    """No oracle: agent B's scores do not move when agent A writes, in a group conversation B is not in, a
    message that matches the query (its words would change BM25's statistics if they were shared)."""
    AgentGroupFactory(id="a-only", members=[agent_a])
    with inline():
        mine = create(agent_b_api, "user-5")
        say(agent_b_api, mine, "the parcel to Porto is late", role="user")
        say(agent_b_api, mine, "a refund for the parcel", role="assistant")
    before = search(agent_b_api, "late parcel", mode="hybrid", minScore=0).json()["data"]
    assert len(before) == 2
    with inline():
        hidden = create(agent_a_api, "user-5", groupId="a-only")
        say(agent_a_api, hidden, "late parcel late parcel late parcel", role="assistant")
        say(agent_a_api, hidden, "late parcel", role="user")
        sync(agent_a_api, mine, "late parcel, late parcel")  # A's memory stream in B's conversation
    after = search(agent_b_api, "late parcel", mode="hybrid", minScore=0).json()["data"]
    assert [(m["id"], m["score"]) for m in after] == [(m["id"], m["score"]) for m in before]


def test_the_context_adds_the_most_relevant_earlier_messages_it_may_read(
    agent_a, agent_a_api, agent_b_api, support, inline
):
    url = f"/v1/conversations/{support}/context"
    with inline():
        say(agent_b_api, support, "B-reply: so the user speaks fluent Portuguese", role="assistant")
        say(agent_a_api, support, "Noted, thanks.", role="user")
    response = agent_a_api.get(url, {"q": "does the user know Portuguese?", "minScore": 0})
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["relevantMessages"] == []  # the whole history is in the context already (at most 50)
    assert agent_a_api.get(url).json()["relevantMessages"] == []
    assert_envelope(agent_a_api.get(url, {"minScore": 0.5}), 400, "bad_request")
    assert_envelope(agent_a_api.get(url, {"q": "x", "minScore": 2}), 400, "bad_request")
    # A shorter history window: the earlier messages most relevant come back, as agent A sees the history
    # (B's reply is not in A's isolated view), best first, with probabilities.
    caller = Caller(role="agent", agent=agent_a)
    context = services.conversation_context(
        caller=caller, conversation_id=support, history_limit=1, query="does the user know Portuguese?",
        min_score=0,
    )  # fmt: skip
    assert context.relevant_messages is not None
    texts = [scored.message.content[0]["text"] for scored in context.relevant_messages.messages]
    assert texts[0] == "Portuguese with my mother, English at work."
    assert not any(t.startswith("B-reply") for t in texts) and "Noted, thanks." not in texts
    assert len(texts) == 4
