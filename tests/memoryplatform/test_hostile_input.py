"""Hostile input at the REST doors: a 4xx in the envelope, never a 5xx, and nothing written (issue 16)."""

import json

import pytest

from conversations.models import Message
from tests.helpers import assert_envelope
from usermemory.models import MemoryEntry, MemoryEvent

MEMORIES = "/usermemorystore/memories"


@pytest.fixture
def nothing_written(db):
    yield
    assert not MemoryEntry.objects.exists()
    assert not MemoryEvent.objects.exists()
    assert not Message.objects.exists()


def _put_raw(client, path, text):
    return client.put(path, data=text, content_type="application/json")


def _nested(depth):
    return "[" * depth + "]" * depth


# --- JSON bodies ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        '{"userId": "u", "key": "k", "value": "a\\u0000b"}',
        '{"userId": "u\\u0000", "key": "k", "value": 1}',
        '{"userId": "u", "key": "k\\u0000", "value": 1}',
        '{"userId": "u", "key": "k", "value": {"nul\\u0000key": 1}}',
        '{"userId": "u", "key": "k", "value": "\\ud800"}',
        '{"userId": "u", "key": "\\udfff", "value": 1}',
        '{"userId": "u", "key": "k", "value": ["x", {"y": "\\ud83d"}]}',
    ],
    ids=["nul-value", "nul-user", "nul-key", "nul-in-key", "surrogate", "surrogate-key", "deep-surrogate"],
)
def test_nul_and_lone_surrogates_in_json_are_refused(agent_a_api, admin_api, nothing_written, body):
    for client in (agent_a_api, admin_api):
        refused = assert_envelope(_put_raw(client, MEMORIES, body), 400, "bad_request")
        assert "JSON" in refused["error"]
    batch = f"[{body}]"
    assert_envelope(_put_raw(agent_a_api, f"{MEMORIES}/batch", batch), 400, "bad_request")


@pytest.mark.parametrize("number", ["1e400", "-1e400", "[1, 2e999]"])
def test_numbers_that_parse_as_infinity_are_refused(agent_a_api, admin_api, nothing_written, number):
    body = '{"userId": "u", "key": "k", "value": ' + number + "}"
    refused = assert_envelope(_put_raw(agent_a_api, MEMORIES, body), 400, "bad_request")
    assert "out of range" in refused["error"]
    properties = admin_api.post(
        "/propertiesstore/properties/u", data='{"k": ' + number + "}", content_type="application/json"
    )
    assert_envelope(properties, 400, "bad_request")


@pytest.mark.parametrize("depth", [65, 1000, 100_000])
def test_deeply_nested_json_is_refused(agent_a_api, nothing_written, depth):
    body = '{"userId": "u", "key": "k", "value": ' + _nested(depth) + "}"
    refused = assert_envelope(_put_raw(agent_a_api, MEMORIES, body), 400, "bad_request")
    assert "deep" in refused["error"]


def test_json_nested_64_deep_is_stored(agent_a_api):
    body = '{"userId": "u", "key": "k", "value": ' + _nested(63) + "}"
    assert _put_raw(agent_a_api, MEMORIES, body).status_code == 201


def test_nul_in_a_conversation_message_is_refused(agent_a_api, nothing_written):
    conversation = agent_a_api.post("/v1/conversations", {"userId": "u"}, format="json").json()
    body = '{"role": "user", "sessionId": "s", "content": [{"type": "text", "text": "a\\u0000"}]}'
    response = agent_a_api.post(
        f"/v1/conversations/{conversation['id']}/messages", data=body, content_type="application/json"
    )
    assert_envelope(response, 400, "bad_request")


# --- Paths and query strings ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        f"{MEMORIES}/u%00x/count",
        f"{MEMORIES}/u%00x",
        f"{MEMORIES}/u/key/k%00",
        f"{MEMORIES}/u/category/c%00",
        f"{MEMORIES}/u/search?q=a%00",
        f"{MEMORIES}/u/visible?groupId=g%00",
        f"{MEMORIES}/u?x%00=1",
        "/propertiesstore/properties/u%00",
        "/v1/conversations/c%00",
        "/v1/agents/a%00",
    ],
)
def test_nul_in_a_path_or_query_is_refused(admin_api, path):
    refused = assert_envelope(admin_api.get(path), 400, "bad_request")
    assert "NUL" in refused["error"]


def test_nul_in_a_path_writes_nothing(admin_api, agent_a_api, nothing_written):
    response = admin_api.post("/propertiesstore/properties/u%00", {"a": 1}, format="json")
    assert_envelope(response, 400, "bad_request")
    assert_envelope(agent_a_api.delete(f"{MEMORIES}/u%00/key/k"), 400, "bad_request")


# --- Integers ---------------------------------------------------------------------------------------------

HUGE = str(2**63)


@pytest.mark.parametrize(
    "path",
    [
        f"{MEMORIES}/u?offset={HUGE}",
        f"{MEMORIES}/u?limit={HUGE}",
        f"{MEMORIES}/u?offset=-1",
        f"{MEMORIES}/u/category/fact?offset={HUGE}",
        f"{MEMORIES}/u/search?q=a&offset={HUGE}",
        f"/v1/memories/search?q=a&offset={HUGE}",
        f"{MEMORIES}/u/visible?agentId=agent-a&limit={HUGE}",
        f"/v1/agents?offset={HUGE}",
        f"/v1/agents?limit={HUGE}",
        "/v1/agents?offset=-5",
        f"/v1/groups?offset={HUGE}",
    ],
)
def test_out_of_range_integers_are_refused(admin_api, agent_a, path):
    refused = assert_envelope(admin_api.get(path), 400, "bad_request")
    assert "ErrorDetail" not in refused["error"]


def test_a_huge_epoch_is_refused(agent_a_api):
    conversation = agent_a_api.post("/v1/conversations", {"userId": "u"}, format="json").json()
    messages = f"/v1/conversations/{conversation['id']}/messages"
    assert_envelope(agent_a_api.get(f"{messages}?channel=memory&epoch={HUGE}"), 400, "bad_request")
    body = {"role": "user", "sessionId": "s", "channel": "memory", "memoryEpoch": 2**63, "content": []}
    assert_envelope(agent_a_api.post(messages, body, format="json"), 400, "bad_request")
    assert not Message.objects.exists()


@pytest.mark.parametrize(
    ("path", "status", "code"),
    [
        (f"{MEMORIES}/u?limit=\u0661", 400, "bad_request"),
        (f"{MEMORIES}/u?offset=\u0661", 400, "bad_request"),
        (f"{MEMORIES}/u/visible?agentId=agent-a&limit=\u0665", 400, "bad_request"),
        ("/v1/agents?limit=\u0661", 400, "bad_request"),
        ("/v1/agents?offset=\u0661", 400, "bad_request"),
        ("/v1/conversations?limit=\u0665", 400, "bad_request"),
        (f"{MEMORIES}/entry/\u0661/history", 404, "not_found"),
    ],
)
def test_unicode_digits_are_not_numbers(admin_api, agent_a, path, status, code):
    assert_envelope(admin_api.get(path), status, code)


ARABIC_INDIC = str.maketrans("0123456789", "\u0660\u0661\u0662\u0663\u0664\u0665\u0666\u0667\u0668\u0669")


def test_unicode_digits_do_not_name_a_conversation_or_a_cursor(agent_a_api):
    conversation = agent_a_api.post("/v1/conversations", {"userId": "u"}, format="json").json()["id"]
    messages = f"/v1/conversations/{conversation}/messages"
    message = {"role": "user", "sessionId": "s", "content": [{"type": "text", "text": "hi"}]}
    first = agent_a_api.post(messages, message, format="json").json()["id"]
    lookalike = conversation.translate(ARABIC_INDIC)
    assert lookalike != conversation
    assert_envelope(agent_a_api.get(f"/v1/conversations/{lookalike}"), 404, "not_found")
    assert_envelope(
        agent_a_api.post(f"/v1/conversations/{lookalike}/messages", message, format="json"), 404, "not_found"
    )
    assert_envelope(agent_a_api.get(f"{messages}?after={first.translate(ARABIC_INDIC)}"), 400, "bad_request")
    assert_envelope(agent_a_api.get(f"/v1/conversations?after={lookalike}"), 400, "bad_request")
    assert Message.objects.count() == 1


def test_unicode_digits_in_a_policy_are_refused(admin_api, agent_a):
    body = {"memoryPolicy": {"maxRecallEntries": "\u0665"}}
    assert_envelope(admin_api.patch("/v1/agents/agent-a", body, format="json"), 400, "bad_request")


def test_pagination_within_bounds_still_pages(admin_api, agent_a, agent_b):
    page = admin_api.get("/v1/agents?limit=1&offset=1").json()
    assert page["count"] == 2 and len(page["results"]) == 1


# --- Batches and error messages ---------------------------------------------------------------------------


def test_batch_item_with_a_non_string_group_id(agent_a_api, nothing_written):
    batch = [{"userId": "u", "key": "k", "value": 1, "visibility": "group", "groupIds": ["team", 1]}]
    refused = assert_envelope(agent_a_api.put(f"{MEMORIES}/batch", batch, format="json"), 400, "bad_request")
    assert refused["error"].startswith("entries[0]: groupIds"), refused
    assert "ErrorDetail" not in refused["error"]
    assert refused["details"]["index"] == 0


def test_batch_error_messages_are_text_not_reprs(agent_a_api, nothing_written):
    batch = [{"userId": "u", "key": "k", "value": 1}, {"userId": ["u"], "key": "k", "value": 1}]
    refused = assert_envelope(agent_a_api.put(f"{MEMORIES}/batch", batch, format="json"), 400, "bad_request")
    assert refused["error"] == "entries[1]: userId: Not a valid string.", refused


def test_batch_turn_id_must_be_a_string(agent_a_api, nothing_written):
    body = {"turnId": ["t"], "entries": [{"userId": "u", "key": "k", "value": 1}]}
    assert_envelope(agent_a_api.put(f"{MEMORIES}/batch", body, format="json"), 400, "bad_request")


# --- The absolute value size limit ------------------------------------------------------------------------


@pytest.fixture
def small_value_limit(settings):
    settings.MEMORY_MAX_VALUE_CHARS = 50
    return 50


def test_an_admin_global_value_over_the_limit_is_refused(admin_api, small_value_limit, nothing_written):
    body = {"userId": "u", "key": "k", "value": "v" * 51, "visibility": "global"}
    refused = assert_envelope(admin_api.put(MEMORIES, body, format="json"), 400, "bad_request")
    assert "MEMORY_MAX_VALUE_CHARS" in refused["error"] and "50" in refused["error"]
    assert refused["details"] == {"limit": "MEMORY_MAX_VALUE_CHARS", "max": 50}


def test_the_limit_holds_at_every_write_door(admin_api, agent_a_api, small_value_limit, nothing_written):
    big = {"text": "v" * 60}
    batch = [{"userId": "u", "key": "k", "value": big, "visibility": "global"}]
    assert_envelope(admin_api.put(f"{MEMORIES}/batch", batch, format="json"), 400, "bad_request")
    assert_envelope(
        admin_api.post("/propertiesstore/properties/u", {"name": "v" * 60}, format="json"), 400, "bad_request"
    )
    # The agent's own guardrail (maxValueLength 1000) is above the absolute limit: the absolute one refuses.
    response = agent_a_api.put(MEMORIES, {"userId": "u", "key": "k", "value": big}, format="json")
    assert_envelope(response, 400, "bad_request")
    tool = agent_a_api.post(
        "/v1/tools/rememberFact/invoke",
        {"userId": "u", "arguments": {"key": "k", "value": "v" * 60, "category": "fact"}},
        format="json",
    )
    assert tool.status_code == 200 and "MEMORY_MAX_VALUE_CHARS" in tool.json()["result"], tool.content


def test_a_value_at_the_limit_is_stored(admin_api, small_value_limit):
    body = {"userId": "u", "key": "k", "value": "v" * 50, "visibility": "global"}
    assert admin_api.put(MEMORIES, body, format="json").status_code == 201


def test_the_default_limit_refuses_a_large_admin_value_under_the_body_limit(admin_api, nothing_written):
    value = ["x" * 1000] * 101  # about 100 KB of text: under the 1 MB body limit, over 100,000 characters
    body = json.dumps({"userId": "u", "key": "k", "value": value, "visibility": "global"})
    refused = assert_envelope(_put_raw(admin_api, MEMORIES, body), 400, "bad_request")
    assert "MEMORY_MAX_VALUE_CHARS" in refused["error"]
