"""EDDI's four LLM tools through ``/v1/tools``: schemas, exact texts, and the rules the services enforce."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.helpers import assert_envelope
from usermemory.models import MemoryEntry, TurnWriteCount

U = "user-llm"
TOOLS = "/v1/tools"


@pytest.fixture
def invoke():
    """``invoke(client, "rememberFact", key=..., value=...)`` -> the response; context via ``_context``."""

    def _invoke(client, name, _context=None, _headers=None, **arguments):
        body = {"userId": U, **(_context or {}), "arguments": arguments}
        return client.post(f"{TOOLS}/{name}/invoke", body, format="json", headers=_headers or {})

    return _invoke


@pytest.fixture
def text(invoke):
    """The tool's text result, asserting the 200 ``{"result": ...}`` shape."""

    def _text(client, name, **kwargs):
        response = invoke(client, name, **kwargs)
        assert response.status_code == 200, response.content
        body = response.json()
        assert set(body) == {"result"}
        return body["result"]

    return _text


# --- GET /v1/tools ------------------------------------------------------------------------------------


def test_tools_are_openai_function_schemas(agent_a_api):
    response = agent_a_api.get(TOOLS)
    assert response.status_code == 200
    tools = response.json()
    assert [t["function"]["name"] for t in tools] == [
        "rememberFact",
        "recallMemories",
        "searchMemory",
        "forgetFact",
        "createTask",
        "completeTask",
        "listMyTasks",
    ]
    for tool in tools:
        assert set(tool) == {"type", "function"} and tool["type"] == "function"
        assert set(tool["function"]) == {"name", "description", "parameters"}
        assert tool["function"]["description"]
        assert tool["function"]["parameters"]["type"] == "object"
    remember, recall, search, forget, *_tasks = (t["function"]["parameters"] for t in tools)
    assert set(remember["properties"]) == {
        "key",
        "value",
        "category",
        "visibility",
        "confidence",
        "source",
        "ttlSeconds",
    }
    assert remember["required"] == ["key", "value", "category"]
    assert remember["properties"]["category"]["enum"] == ["preference", "fact", "context"]
    assert remember["properties"]["visibility"]["enum"] == ["self", "group", "global"]
    assert remember["properties"]["visibility"]["default"] == "self"
    assert recall["properties"] == {}
    assert search["required"] == ["query"] and forget["required"] == ["key"]
    assert search["properties"]["mode"]["enum"] == ["keyword", "semantic", "hybrid"]
    assert search["properties"]["mode"]["default"] == "hybrid"


def test_remember_category_enum_follows_the_agents_policy(agent_a, agent_a_api, set_policy):
    set_policy(agent_a, allowed_categories=["fact", "hobby"])
    remember = agent_a_api.get(TOOLS).json()[0]["function"]
    assert remember["parameters"]["properties"]["category"]["enum"] == ["fact", "hobby"]


def test_tools_need_an_agent_key(viewer_api, admin_api, anon_api, invoke):
    assert_envelope(viewer_api.get(TOOLS), 403, "forbidden")
    assert_envelope(admin_api.get(TOOLS), 403, "forbidden")
    assert_envelope(anon_api.get(TOOLS), 401, "unauthorized")
    assert_envelope(invoke(admin_api, "rememberFact", key="k", value="v", category="fact"), 403, "forbidden")
    assert_envelope(invoke(anon_api, "recallMemories"), 401, "unauthorized")
    assert not MemoryEntry.objects.exists()


# --- EDDI's texts -----------------------------------------------------------------------------------------


def test_the_four_tools_answer_with_eddis_texts(agent_a_api, text):
    assert (
        text(agent_a_api, "rememberFact", key="favorite_color", value="blue", category="preference")
        == "✅ Remembered: favorite_color = blue [preference, self]"
    )
    assert (
        text(agent_a_api, "rememberFact", key="name", value="Alice", category="fact", visibility="self")
        == "✅ Remembered: name = Alice [fact, self]"
    )
    assert (
        text(
            agent_a_api,
            "rememberFact",
            key="language",
            value="English",
            category="preference",
            visibility="global",
        )
        == "✅ Remembered: language = English [preference, global]"
    )
    assert text(agent_a_api, "recallMemories") == (
        "  • language = English [preference, global]\n"
        "  • name = Alice [fact, self]\n"
        "  • favorite_color = blue [preference, self]"
    )
    assert text(agent_a_api, "searchMemory", query="COLOR") == "  • favorite_color = blue [preference, self]"
    assert text(agent_a_api, "forgetFact", key="favorite_color") == "✅ Forgotten: favorite_color"
    assert text(agent_a_api, "searchMemory", query="color") == "No memories found matching 'color'."
    assert set(MemoryEntry.objects.values_list("key", flat=True)) == {"name", "language"}


def test_remember_updates_the_same_key_and_records_the_conversation(agent_a_api, text):
    text(agent_a_api, "rememberFact", key="city", value="Rome", category="fact")
    assert (
        text(
            agent_a_api,
            "rememberFact",
            _context={"conversationId": "conv-9"},
            key="city",
            value="Oslo",
            category="fact",
        )
        == "✅ Remembered: city = Oslo [fact, self]"
    )
    entry = MemoryEntry.objects.get()
    assert (entry.value, entry.source_agent_id, entry.source_conversation_id) == ("Oslo", "agent-a", "conv-9")


def test_empty_recall_and_unknown_forget_texts(agent_a_api, text):
    assert text(agent_a_api, "recallMemories") == "No memories stored for this user yet."
    assert text(agent_a_api, "forgetFact", key="nothing") == "No memory with key 'nothing' to forget."


def test_group_memory_uses_the_conversations_groups(agent_a_api, agent_b_api, text):
    context = {"groupIds": ["team"]}
    assert (
        text(
            agent_a_api,
            "rememberFact",
            _context=context,
            key="plan",
            value="ship",
            category="context",
            visibility="group",
        )
        == "✅ Remembered: plan = ship [context, group]"
    )
    assert MemoryEntry.objects.get().group_ids == ["team"]
    assert text(agent_a_api, "recallMemories", _context=context) == "  • plan = ship [context, group]"
    assert text(agent_b_api, "recallMemories") == "No memories stored for this user yet."


# --- The rules hold through the tools ---------------------------------------------------------------------


@pytest.mark.parametrize("turn", ["body", "header"])
def test_writes_per_turn_ten_pass_the_eleventh_is_refused_as_text(agent_a_api, text, turn):
    def remember(n, turn_id="turn-1"):
        if turn == "header":
            return text(
                agent_a_api,
                "rememberFact",
                _headers={"X-Turn-Id": turn_id},
                key=f"k{n}",
                value="v",
                category="fact",
            )
        return text(
            agent_a_api, "rememberFact", _context={"turnId": turn_id}, key=f"k{n}", value="v", category="fact"
        )

    for n in range(10):
        assert remember(n) == f"✅ Remembered: k{n} = v [fact, self]"
    assert remember(10) == (
        "❌ Not remembered: Write limit reached: 10 memory writes per turn (maxWritesPerTurn)."
    )
    assert MemoryEntry.objects.count() == 10
    assert not MemoryEntry.objects.filter(key="k10").exists()
    assert TurnWriteCount.objects.get(turn_id="turn-1").count == 10
    assert remember(10, turn_id="turn-2") == "✅ Remembered: k10 = v [fact, self]"


def test_guardrail_refusals_are_texts_and_write_nothing(agent_a, agent_a_api, set_policy, text):
    set_policy(agent_a, max_value_length=5)
    assert text(agent_a_api, "rememberFact", key="a", value="v", category="gossip") == (
        "❌ Not remembered: category 'gossip' is not allowed (allowedCategories: preference, fact, context)."
    )
    assert text(agent_a_api, "rememberFact", key="a", value="123456", category="fact") == (
        "❌ Not remembered: value is 6 characters; the limit (maxValueLength) is 5."
    )
    assert not MemoryEntry.objects.exists()


def test_an_agent_cannot_search_or_forget_another_agents_self_entries(agent_a_api, agent_b_api, text):
    text(agent_a_api, "rememberFact", key="secret_plan", value="surprise party", category="context")
    text(
        agent_a_api,
        "rememberFact",
        key="shared_plan",
        value="party on friday",
        category="context",
        visibility="global",
    )

    assert (
        text(agent_b_api, "searchMemory", query="plan")
        == "  • shared_plan = party on friday [context, global]"
    )
    assert text(agent_b_api, "forgetFact", key="secret_plan") == "No memory with key 'secret_plan' to forget."
    # A global entry is visible to B, but only its owner may forget it.
    assert text(agent_b_api, "forgetFact", key="shared_plan") == "No memory with key 'shared_plan' to forget."
    assert MemoryEntry.objects.count() == 2

    # hybrid (the default) ranks by relevance; keyword is EDDI's literal match, newest first
    assert set(text(agent_a_api, "searchMemory", query="plan").splitlines()) == {
        "  • shared_plan = party on friday [context, global]",
        "  • secret_plan = surprise party [context, self]",
    }
    assert text(agent_a_api, "searchMemory", query="plan", mode="keyword") == (
        "  • shared_plan = party on friday [context, global]\n"
        "  • secret_plan = surprise party [context, self]"
    )
    assert text(agent_a_api, "forgetFact", key="secret_plan") == "✅ Forgotten: secret_plan"
    assert list(MemoryEntry.objects.values_list("key", flat=True)) == ["shared_plan"]


def test_recall_uses_the_agents_order_and_limit(agent_a, agent_a_api, set_policy, text):
    for key in ("first", "second", "third"):
        text(agent_a_api, "rememberFact", key=key, value="v", category="fact")
    set_policy(agent_a, max_recall_entries=2, recall_order="most_recent")
    assert text(agent_a_api, "recallMemories") == "  • third = v [fact, self]\n  • second = v [fact, self]"
    # most_recent counts no access (EDDI); it only moves lastAccessedAt.
    assert dict(MemoryEntry.objects.values_list("key", "access_count")) == {
        "first": 0,
        "second": 0,
        "third": 0,
    }
    assert set(MemoryEntry.objects.filter(last_accessed_at__isnull=False).values_list("key", flat=True)) == {
        "second",
        "third",
    }

    # most_accessed: 1 slot for the most recent (third), the rest by access count (second).
    set_policy(agent_a, max_recall_entries=2, recall_order="most_accessed")
    MemoryEntry.objects.filter(key="first").update(access_count=50)
    assert text(agent_a_api, "recallMemories") == "  • third = v [fact, self]\n  • first = v [fact, self]"


def test_search_is_bounded_by_the_recall_limit(agent_a, agent_a_api, set_policy, text):
    for n in range(4):
        text(agent_a_api, "rememberFact", key=f"pet{n}", value="cat", category="fact")
    set_policy(agent_a, max_recall_entries=3)
    assert text(agent_a_api, "searchMemory", query="cat").count("•") == 3


def test_recall_queries_do_not_grow_with_entries(agent_a_api, invoke, text):
    def recall_queries():
        with CaptureQueriesContext(connection) as queries:
            assert invoke(agent_a_api, "recallMemories").status_code == 200
        return len(queries)

    for n in range(2):
        text(agent_a_api, "rememberFact", key=f"a{n}", value="v", category="fact", _context={"turnId": "t1"})
    few = recall_queries()
    for n in range(8):
        text(agent_a_api, "rememberFact", key=f"b{n}", value="v", category="fact", _context={"turnId": "t2"})
    assert recall_queries() == few


# --- Bad requests -----------------------------------------------------------------------------------------


def test_unknown_tool_is_404(agent_a_api, invoke):
    body = assert_envelope(invoke(agent_a_api, "deleteEverything"), 404, "not_found")
    assert "rememberFact" in body["error"]


@pytest.mark.parametrize(
    "body",
    [
        {"arguments": {}},
        {"userId": 7, "arguments": {}},
        {"userId": U, "arguments": ["not", "an", "object"]},
        {"userId": U, "groupIds": "team", "arguments": {}},
    ],
)
def test_bad_body_is_400(agent_a_api, body):
    assert_envelope(
        agent_a_api.post(f"{TOOLS}/recallMemories/invoke", body, format="json"), 400, "bad_request"
    )


def test_a_group_the_agent_is_not_in_is_403(agent_a_api, invoke):
    response = invoke(
        agent_a_api, "rememberFact", _context={"groupIds": ["strangers"]}, key="k", value="v", category="fact"
    )
    assert "strangers" in assert_envelope(response, 403, "forbidden")["error"]
    assert not MemoryEntry.objects.exists()


@pytest.mark.parametrize(
    ("name", "arguments", "expected"),
    [
        (
            "rememberFact",
            {"value": "v", "category": "fact"},
            "❌ Invalid arguments for rememberFact: key is required.",
        ),
        (
            "rememberFact",
            {"key": "k", "category": "fact"},
            "❌ Invalid arguments for rememberFact: value is required.",
        ),
        (
            "rememberFact",
            {"key": 5, "value": "v"},
            "❌ Invalid arguments for rememberFact: key must be a string.",
        ),
        (
            "rememberFact",
            {"key": "k", "value": "v", "visibility": "everyone"},
            "❌ Not remembered: visibility must be one of self, group, global.",
        ),
        ("searchMemory", {}, "❌ Invalid arguments for searchMemory: query is required."),
        (
            "searchMemory",
            {"query": "x", "mode": "fuzzy"},
            "❌ Invalid arguments for searchMemory: mode must be one of keyword, semantic, hybrid.",
        ),
        (
            "searchMemory",
            {"query": "x", "mode": 3},
            "❌ Invalid arguments for searchMemory: mode must be a string.",
        ),
        (
            "forgetFact",
            {"key": "k", "force": True},
            "❌ Invalid arguments for forgetFact: unknown parameter(s): force.",
        ),
    ],
)
def test_arguments_the_llm_got_wrong_come_back_as_text(agent_a_api, text, name, arguments, expected):
    assert text(agent_a_api, name, **arguments) == expected
    assert not MemoryEntry.objects.exists()
