"""Channels through REST with real keys: per-agent memory, the isolated history view (seed 004), batches and
cursors."""

from conversations.models import Message
from tests.conversations.utils import BASE, create, listing, post, say, text, texts
from tests.factories import AgentFactory
from tests.helpers import assert_envelope


def test_two_agents_write_memory_in_one_conversation_and_each_reads_back_only_its_own(
    agent_a_api, agent_b_api
):
    """memory-service's multi-agent scenario (seed 000)."""
    conversation = create(agent_a_api)
    say(agent_a_api, conversation, "a remembers 1", channel="memory")
    say(agent_b_api, conversation, "b remembers 1", channel="memory")
    say(agent_a_api, conversation, "a remembers 2", channel="memory", role="assistant")

    mine_a = listing(agent_a_api, conversation, channel="memory")["data"]
    mine_b = listing(agent_b_api, conversation, channel="memory")["data"]
    assert texts(mine_a) == ["a remembers 1", "a remembers 2"]
    assert {m["agentId"] for m in mine_a} == {"agent-a"}
    assert texts(mine_b) == ["b remembers 1"]
    assert mine_b[0]["agentId"] == "agent-b" and mine_b[0]["memoryEpoch"] == 1
    # Naming the other agent does not widen the scope: it is refused.
    assert_envelope(
        agent_a_api.get(f"{BASE}/{conversation}/messages", {"channel": "memory", "agentId": "agent-b"}),
        403,
        "forbidden",
    )


def test_memory_read_by_viewer_or_admin_names_the_agent(agent_a_api, agent_b_api, viewer_api, admin_api):
    conversation = create(agent_a_api)
    say(agent_a_api, conversation, "a's", channel="memory")
    say(agent_b_api, conversation, "b's", channel="memory")
    assert_envelope(
        viewer_api.get(f"{BASE}/{conversation}/messages", {"channel": "memory"}), 400, "bad_request"
    )
    assert texts(listing(viewer_api, conversation, channel="memory", agentId="agent-b")["data"]) == ["b's"]
    assert texts(listing(admin_api, conversation, channel="memory", agentId="agent-a")["data"]) == ["a's"]
    assert_envelope(
        admin_api.get(f"{BASE}/{conversation}/messages", {"channel": "memory", "agentId": "nobody"}),
        404,
        "not_found",
    )


def test_seed_004_each_agent_sees_every_user_message_and_only_its_own_replies(make_api_client):
    nova = make_api_client("agent", AgentFactory(id="nova"))
    aniza = make_api_client("agent", AgentFactory(id="aniza"))
    conversation = create(nova, "user-123")

    say(nova, conversation, "Tell me about AI in solar panels")  # the user's message, posted by Nova's app
    say(nova, conversation, "Nova: AI insights", role="assistant")
    say(aniza, conversation, "What are the NZIA requirements?")
    say(aniza, conversation, "Aniza: NZIA requirements", role="assistant")
    say(nova, conversation, "And for wafers?")
    say(nova, conversation, "Nova: wafers", role="assistant")

    anizas_view = listing(aniza, conversation, channel="history", view="agent")["data"]
    assert texts(anizas_view) == [
        "Tell me about AI in solar panels",
        "What are the NZIA requirements?",
        "Aniza: NZIA requirements",
        "And for wafers?",
    ]
    # A user message carries the agent whose key relayed it (seed 000), and every agent still sees it.
    assert [m["agentId"] for m in anizas_view if m["role"] == "user"] == ["nova", "aniza", "nova"]

    novas_view = listing(nova, conversation, channel="history", view="agent")["data"]
    assert texts(novas_view) == [
        "Tell me about AI in solar panels",
        "Nova: AI insights",
        "What are the NZIA requirements?",
        "And for wafers?",
        "Nova: wafers",
    ]
    # Without the view, history is what the user saw: everything, in sequence order.
    full = listing(aniza, conversation, channel="history")["data"]
    assert len(full) == 6 and [m["seq"] for m in full] == sorted(m["seq"] for m in full)


def test_the_numbers_an_agent_sees_count_no_message_it_cannot_see(agent_a_api, agent_b_api, admin_api):
    """Issue 44, finding 12: agent A writes to its private memory channel between two shared messages; agent B
    sees consecutive numbers on the shared channels, and pages by them, as A does in its own stream."""
    conversation = create(agent_a_api)
    say(agent_a_api, conversation, "hello", role="assistant")
    for n in range(3):
        say(agent_a_api, conversation, f"a's note {n}", channel="memory")
    say(agent_a_api, conversation, "case: refund asked", channel="summary", role="assistant")
    sync = [{"role": "user", "content": text("synced")}]
    agent_a_api.post(f"{BASE}/{conversation}/memory/messages/sync", {"messages": sync}, format="json")
    say(agent_b_api, conversation, "b's note", channel="memory")
    say(agent_b_api, conversation, "how can I help?", role="assistant")
    say(agent_b_api, conversation, "case: refund approved", channel="summary", role="assistant")

    history = listing(agent_b_api, conversation, channel="history")["data"]
    assert [(m["seq"], m["content"][0]["text"]) for m in history] == [(1, "hello"), (2, "how can I help?")]
    case_log = listing(agent_b_api, conversation, channel="summary")["data"]
    assert [m["seq"] for m in case_log] == [1, 2]
    # Each agent's stream counts its own messages only: b's first is 1, whatever a wrote.
    assert [m["seq"] for m in listing(agent_b_api, conversation, channel="memory")["data"]] == [1]
    a_all = listing(agent_a_api, conversation, channel="memory", epoch="all")["data"]
    assert [m["seq"] for m in a_all] == [1, 2, 3, 4]
    # Cursors page within a list; one of another list (here a's private note) is refused as unknown.
    first = listing(agent_b_api, conversation, channel="history", limit=1)
    assert texts(first["data"]) == ["hello"] and first["nextCursor"] == history[0]["id"]
    rest = listing(agent_b_api, conversation, channel="history", after=first["nextCursor"])["data"]
    assert texts(rest) == ["how can I help?"]
    page = listing(agent_a_api, conversation, channel="memory", epoch="all", after=a_all[1]["id"])["data"]
    assert [m["seq"] for m in page] == [3, 4]
    nobody = "00000000-0000-0000-0000-000000000000"
    for client in (agent_b_api, admin_api):
        for cursor in (a_all[0]["id"], nobody):  # the same answer as for no such message
            refused = client.get(f"{BASE}/{conversation}/messages", {"channel": "history", "after": cursor})
            assert assert_envelope(refused, 400, "bad_request")["error"] == (
                f"Unknown cursor '{cursor}': no such message in this list."
            )
    # The case-log checkpoint and the context read by these numbers too.
    checkpoint = {"lastEntryId": case_log[0]["id"]}
    assert agent_b_api.put(f"{BASE}/{conversation}/checkpoint", checkpoint, format="json").status_code == 200
    context = agent_b_api.get(f"{BASE}/{conversation}/context").json()
    assert texts(context["caseLog"]["data"]) == ["case: refund approved"]


def test_agent_comes_from_the_key_never_from_the_body(agent_a_api, agent_b_api):
    conversation = create(agent_a_api)
    written = say(agent_a_api, conversation, "hi", role="assistant", agentId="agent-b")  # returned: ignored
    assert written["agentId"] == "agent-a"
    assert Message.objects.get(id=written["id"]).agent_id == "agent-a"
    # A field the API never returns is refused, naming it (strict input), and nothing is written.
    refused = post(agent_a_api, conversation, content="hi", role="assistant", agent="agent-b")
    assert assert_envelope(refused, 400, "bad_request")["error"].startswith("agent: unknown field")
    assert Message.objects.count() == 1


def test_batch_is_all_or_nothing_and_at_most_20(agent_a_api):
    conversation = create(agent_a_api)
    url = f"{BASE}/{conversation}/messages"
    batch = [{"role": "user", "content": text(f"m{i}"), "sessionId": "s"} for i in range(21)]

    assert_envelope(agent_a_api.post(url, {"messages": batch}, format="json"), 400, "bad_request")
    assert Message.objects.count() == 0

    bad = batch[:5]
    bad[3] = {"role": "user", "content": [], "sessionId": "s"}
    body = assert_envelope(agent_a_api.post(url, {"messages": bad}, format="json"), 400, "bad_request")
    assert body["details"]["index"] == 3 and body["error"].startswith("messages[3]")
    assert Message.objects.count() == 0

    # A rule only the service knows (an older memory epoch) also rolls back the messages before it.
    refused = [
        {"role": "user", "content": text("ok"), "sessionId": "s"},
        {"channel": "memory", "role": "user", "content": text("x"), "sessionId": "s", "memoryEpoch": 5},
    ]
    assert_envelope(agent_a_api.post(url, {"messages": refused}, format="json"), 400, "bad_request")
    assert Message.objects.count() == 0

    response = agent_a_api.post(url, {"messages": batch[:20], "sessionId": "ignored"}, format="json")
    assert response.status_code == 201, response.content
    data = response.json()["data"]
    assert len(data) == 20 and texts(data) == [f"m{i}" for i in range(20)]
    assert [m["seq"] for m in data] == list(range(1, 21))
    assert {m["sessionId"] for m in data} == {"s"}


def test_batch_session_id_applies_to_messages_without_one(agent_a_api):
    conversation = create(agent_a_api)
    body = {"sessionId": "top", "messages": [{"role": "user", "content": text("x")}]}
    response = agent_a_api.post(f"{BASE}/{conversation}/messages", body, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["data"][0]["sessionId"] == "top"
    missing = {"messages": [{"role": "user", "content": text("x")}]}
    response = agent_a_api.post(f"{BASE}/{conversation}/messages", missing, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["data"][0]["sessionId"] is None


def test_cursor_pages_follow_sequence_order(agent_a_api):
    conversation = create(agent_a_api)
    for i in range(7):
        say(agent_a_api, conversation, f"m{i}", channel="summary", role="assistant")
    say(agent_a_api, conversation, "not in the case log")

    seen, cursor, pages = [], None, 0
    while True:
        params = {"channel": "summary", "limit": 3, **({"after": cursor} if cursor else {})}
        page = listing(agent_a_api, conversation, **params)
        seen += texts(page["data"])
        pages += 1
        cursor = page["nextCursor"]
        if cursor is None:
            break
        assert cursor == page["data"][-1]["id"]
    assert seen == [f"m{i}" for i in range(7)]
    assert pages == 3


def test_memory_epochs_on_append(agent_a_api):
    conversation = create(agent_a_api)
    say(agent_a_api, conversation, "e1", channel="memory")
    say(agent_a_api, conversation, "e2", channel="memory", memoryEpoch=2)
    say(agent_a_api, conversation, "e2 again", channel="memory")
    assert texts(listing(agent_a_api, conversation, channel="memory")["data"]) == ["e2", "e2 again"]
    assert texts(listing(agent_a_api, conversation, channel="memory", epoch="1")["data"]) == ["e1"]
    assert texts(listing(agent_a_api, conversation, channel="memory", epoch="all")["data"]) == [
        "e1",
        "e2",
        "e2 again",
    ]
    # No writing into an older epoch, nor skipping one.
    assert_envelope(
        post(agent_a_api, conversation, content="x", channel="memory", memoryEpoch=1), 400, "bad_request"
    )
    assert_envelope(
        post(agent_a_api, conversation, content="x", channel="memory", memoryEpoch=4), 400, "bad_request"
    )


def test_list_endpoint_has_a_bounded_number_of_queries(
    agent_a_api, agent_b_api, django_assert_max_num_queries
):
    conversation = create(agent_a_api, groupId="team")
    for i in range(30):
        say(agent_a_api, conversation, f"m{i}", role="assistant" if i % 2 else "user")
        say(agent_a_api, conversation, f"mem{i}", channel="memory")
    first = listing(agent_a_api, conversation, limit=5)["data"][0]["id"]

    with django_assert_max_num_queries(6):
        page = listing(agent_a_api, conversation, channel="history", view="agent", after=first, limit=50)
    assert len(page["data"]) == 29
    with django_assert_max_num_queries(6):
        page = listing(agent_a_api, conversation, channel="memory", limit=200)
    assert len(page["data"]) == 30
