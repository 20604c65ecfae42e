"""Search across conversations (seed 001's search_all_conversations): ranked full text over the messages each
key may see, with the role x visibility matrix: an agent never sees another agent's memory channel, nor a
conversation of a group it is not in."""

import pytest

from tests.conversations.utils import create, say, sync, text
from tests.factories import AgentFactory, AgentGroupFactory
from tests.helpers import assert_envelope

URL = "/v1/conversations/search"


@pytest.fixture
def world(agent_a, agent_a_api, agent_b_api, make_api_client):
    """Conversation ``open`` (no group, user-1): history by the user (through A), A and B; each agent's own
    memory stream; a case-log entry by A. Conversation ``team`` (group ``team``: A and C, not B, user-2):
    history by C. Every message mentions a refund."""
    agent_c = AgentFactory(id="agent-c")
    AgentGroupFactory(id="team", members=[agent_a, agent_c])
    agent_c_api = make_api_client("agent", agent_c)
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


def found(client, **params):
    response = client.get(URL, {"q": "refund", **params})
    assert response.status_code == 200, response.content
    return sorted(m["content"][0]["text"].split(":")[0] for m in response.json()["data"])


EVERYTHING = ["A-history", "A-memory", "A-summary", "B-history", "B-memory", "C-team", "user"]


@pytest.mark.parametrize(
    ("who", "seen"),
    [
        ("agent_a_api", ["A-history", "A-memory", "A-summary", "B-history", "C-team", "user"]),
        ("agent_b_api", ["A-history", "A-summary", "B-history", "B-memory", "user"]),  # not in team
        ("c", ["A-history", "A-summary", "B-history", "C-team", "user"]),  # no memory of its own
        ("viewer_api", EVERYTHING),
        ("admin_api", EVERYTHING),
    ],
)
def test_each_key_searches_what_it_may_see(request, world, who, seen):
    client = world["c"] if who == "c" else request.getfixturevalue(who)
    assert found(client) == seen


def test_one_agents_messages_never_another_agents_memory(world, agent_a_api, agent_b_api, admin_api):
    assert found(agent_a_api, agentId="agent-b") == ["B-history"]
    assert found(agent_b_api, agentId="agent-a") == [
        "A-history",
        "A-summary",
        "user",
    ]  # the user's, relayed by A
    assert found(admin_api, agentId="agent-b") == ["B-history", "B-memory"]
    assert found(agent_b_api, channel="memory") == ["B-memory"]
    assert found(admin_api, channel="memory") == ["A-memory", "B-memory"]
    assert found(agent_a_api, userId="user-2") == ["C-team"]
    assert found(agent_b_api, userId="user-2") == []


def test_results_are_ranked_best_first_with_scores(agent_a_api, django_assert_num_queries):
    conversation = create(agent_a_api, "user-9")
    say(agent_a_api, conversation, "a parcel went missing")
    say(agent_a_api, conversation, "refund the missing parcel: the refund was promised")
    say(agent_a_api, conversation, "refund sent")
    with django_assert_num_queries(2):  # the key, the search
        response = agent_a_api.get(URL, {"q": "refund parcel"})
    data = response.json()["data"]
    assert [m["content"] for m in data] == [text("refund the missing parcel: the refund was promised")]
    assert (
        data[0]["userId"] == "user-9" and data[0]["score"] > 0 and data[0]["conversationId"] == conversation
    )
    scores = [m["score"] for m in agent_a_api.get(URL, {"q": "refund"}).json()["data"]]
    assert len(scores) == 2 and scores == sorted(scores, reverse=True) and scores[0] > scores[1]
    assert agent_a_api.get(URL, {"q": '"parcel went"'}).json()["data"][0]["content"] == text(
        "a parcel went missing"
    )


@pytest.mark.parametrize(
    "params",
    [{}, {"q": ""}, {"q": "x", "channel": "inbox"}, {"q": "x", "limit": 0}, {"q": "x", "limit": 101}],
)
def test_bad_searches_are_a_400(agent_a_api, params):
    assert_envelope(agent_a_api.get(URL, params), 400, "bad_request")


def test_anonymous_is_401(anon_api, db):
    assert_envelope(anon_api.get(URL, {"q": "x"}), 401, "unauthorized")


# --- A message too long to index whole (issue 33, finding 1) ----------------------------------------------

# The characters of a message's text indexed for search (conversations migration 0003).
INDEXED = 100_000


def distinct_words(count: int) -> list[str]:
    """``count`` distinct words of eight letters (their index in base 26), none a stop word."""
    words = []
    for index in range(count):
        letters = []
        for _ in range(8):
            index, digit = divmod(index, 26)
            letters.append(chr(ord("a") + digit))
        words.append("".join(reversed(letters)))
    return words


# 100,000 distinct words, 900,000 characters: a tsvector of about 1.2 MB of lexemes, over PostgreSQL's 1 MB.
HUGE = distinct_words(100_000)


def search_ids(client, q, **params):
    response = client.get(URL, {"q": q, **params})
    assert response.status_code == 200, response.content[:300]
    return [m["id"] for m in response.json()["data"]]


def test_a_huge_message_is_indexed_in_part_and_no_search_fails(
    agent_a_api, agent_b_api, viewer_api, admin_api
):
    """Any agent may post to an ungrouped conversation: a message of 900 KB of distinct words is stored whole,
    its first 100,000 characters are searchable, and every key's search still answers, ranked as before."""
    conversation = create(agent_b_api, "user-big")
    ordinary = say(agent_a_api, conversation, "refund the missing parcel", role="assistant")["id"]
    huge_text = " ".join(HUGE)
    assert 890_000 < len(huge_text) < 1_000_000
    huge = say(agent_b_api, conversation, huge_text)["id"]
    stored = agent_a_api.get(f"/v1/conversations/{conversation}/messages", {"limit": 200}).json()["data"]
    assert [m["content"][0]["text"] for m in stored] == ["refund the missing parcel", huge_text]
    inside, outside = HUGE[10_000], HUGE[12_000]  # from character 90,000 and 108,000 of the text
    assert huge_text.index(inside) < INDEXED - 100 < INDEXED + 100 < huge_text.index(outside)
    for client in (agent_a_api, agent_b_api, viewer_api, admin_api):
        assert search_ids(client, "refund parcel") == [ordinary]
        assert search_ids(client, HUGE[0]) == [huge]
        assert search_ids(client, f"{inside} {HUGE[1]}") == [huge]
        assert search_ids(client, outside) == []  # stored, not indexed: past the first 100,000 characters
        assert set(search_ids(client, f"{HUGE[0]} or parcel", userId="user-big")) == {ordinary, huge}


@pytest.mark.parametrize("channel", ["summary", "memory"])
def test_the_case_log_and_memory_streams_are_indexed_the_same_way(agent_a_api, viewer_api, channel):
    conversation = create(agent_a_api, "user-big")
    huge_text = " ".join(HUGE)
    if channel == "memory":
        response = sync(agent_a_api, conversation, huge_text)
        assert response.status_code in (200, 201), response.content[:300]
        huge = response.json()["messages"][0]["id"]
    else:
        huge = say(agent_a_api, conversation, huge_text, role="assistant", channel=channel)["id"]
    for client in (agent_a_api, viewer_api):
        assert search_ids(client, HUGE[0], channel=channel) == [huge]
        assert search_ids(client, HUGE[12_000], channel=channel) == []
        assert search_ids(client, "anything") == []


def test_another_search_language_parses_the_same_bounded_text_per_query(settings, agent_a_api, viewer_api):
    """Another SEARCH_LANGUAGE than the stored column's: each message is parsed per query, bounded alike."""
    settings.SEARCH_LANGUAGE = "english"
    conversation = create(agent_a_api, "user-big")
    ordinary = say(agent_a_api, conversation, "the refunds were missing", role="assistant")["id"]
    huge = say(agent_a_api, conversation, " ".join(HUGE))["id"]
    for client in (agent_a_api, viewer_api):
        assert search_ids(client, "refund") == [ordinary]  # stemmed: english, not memory_simple
        assert search_ids(client, HUGE[0]) == [huge]
        assert search_ids(client, HUGE[12_000]) == []
