"""memory-service's memory sync: no-op, delta append, new epoch on divergence, and the epoch filter."""

from conversations.models import Message
from tests.conversations.utils import BASE, create, listing, sync, texts
from tests.helpers import assert_envelope


def synced(client, conversation, *contents):
    response = sync(client, conversation, *contents)
    assert response.status_code == 200, response.content
    return response.json()


def test_sync_noop_delta_and_new_epoch(agent_a_api):
    conversation = create(agent_a_api)

    first = synced(agent_a_api, conversation, "hi", "hello")
    assert (first["memoryEpoch"], first["noOp"], first["epochIncremented"]) == (1, False, False)
    assert texts(first["messages"]) == ["hi", "hello"]

    same = synced(agent_a_api, conversation, "hi", "hello")
    assert (same["memoryEpoch"], same["noOp"], same["epochIncremented"]) == (1, True, False)
    assert same["messages"] == []
    assert Message.objects.count() == 2

    delta = synced(agent_a_api, conversation, "hi", "hello", "how are you?")
    assert (delta["memoryEpoch"], delta["noOp"], delta["epochIncremented"]) == (1, False, False)
    assert texts(delta["messages"]) == ["how are you?"]
    assert Message.objects.count() == 3

    diverged = synced(agent_a_api, conversation, "summary of the chat", "how are you?")
    assert (diverged["memoryEpoch"], diverged["noOp"], diverged["epochIncremented"]) == (2, False, True)
    assert texts(diverged["messages"]) == ["summary of the chat", "how are you?"]

    # A shorter list is a divergence too (the stored messages are not a prefix of it).
    shorter = synced(agent_a_api, conversation, "summary of the chat")
    assert (shorter["memoryEpoch"], shorter["epochIncremented"]) == (3, True)

    # The epoch filter.
    assert texts(listing(agent_a_api, conversation, channel="memory")["data"]) == ["summary of the chat"]
    assert texts(listing(agent_a_api, conversation, channel="memory", epoch="latest")["data"]) == [
        "summary of the chat"
    ]
    assert texts(listing(agent_a_api, conversation, channel="memory", epoch="1")["data"]) == [
        "hi",
        "hello",
        "how are you?",
    ]
    assert texts(listing(agent_a_api, conversation, channel="memory", epoch="2")["data"]) == [
        "summary of the chat",
        "how are you?",
    ]
    everything = listing(agent_a_api, conversation, channel="memory", epoch="all")["data"]
    assert [m["memoryEpoch"] for m in everything] == [1, 1, 1, 2, 2, 3]


def test_sync_is_per_agent(agent_a_api, agent_b_api):
    conversation = create(agent_a_api)
    synced(agent_a_api, conversation, "a1", "a2")
    b = synced(agent_b_api, conversation, "b1")
    assert (b["memoryEpoch"], b["noOp"], b["epochIncremented"]) == (1, False, False)
    # B's sync did not disturb A's stream: A's same list is still a no-op.
    assert synced(agent_a_api, conversation, "a1", "a2")["noOp"] is True
    assert texts(listing(agent_b_api, conversation, channel="memory", epoch="all")["data"]) == ["b1"]


def test_sync_needs_an_agent_key_and_valid_input(agent_a_api, admin_api, viewer_api):
    conversation = create(agent_a_api)
    url = f"{BASE}/{conversation}/memory/messages/sync"
    assert_envelope(sync(admin_api, conversation, "x"), 403, "forbidden")
    assert_envelope(sync(viewer_api, conversation, "x"), 403, "forbidden")
    assert_envelope(
        agent_a_api.post(url, {"sessionId": "s", "messages": []}, format="json"), 400, "bad_request"
    )
    blank_session = {
        "sessionId": "",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "x"}]}],
    }
    assert_envelope(agent_a_api.post(url, blank_session, format="json"), 400, "bad_request")
    empty_content = {"sessionId": "s", "messages": [{"role": "user", "content": []}]}
    assert_envelope(agent_a_api.post(url, empty_content, format="json"), 400, "bad_request")
    assert Message.objects.count() == 0
