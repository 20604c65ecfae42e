"""Strict query strings (issue 45): at every GET of the REST API, a query parameter its OpenAPI operation does
not list is a 400 naming it, with the one meant; every parameter the operation lists is taken."""

import re
import uuid
from urllib.parse import urlencode

import pytest

from tests.conversations.utils import BASE, create
from tests.helpers import assert_envelope

ENTRIES = "/usermemorystore/memories"
# Names other APIs use for what is minScore or limit here, and one no API uses.
STRANGERS = ("min_score", "top_k", "k", "threshold", f"zz{uuid.uuid4().hex[:8]}")
SAMPLE_BY_FORMAT = {"date-time": "2024-01-01T00:00:00Z", "double": "0.1"}


@pytest.fixture
def schema(client, db):
    response = client.get("/api/schema/", HTTP_ACCEPT="application/json")
    assert response.status_code == 200
    return response.json()


@pytest.fixture
def get_operations(schema, agent_a_api):
    """Every GET of the schema: (its path with real values, the query parameters it lists)."""
    values = {
        "user_id": "u1",
        "agent_id": "agent-a",
        "group_id": "team",
        "conversation_id": create(agent_a_api),
    }
    operations = []
    for path, methods in schema["paths"].items():
        if "get" in methods:
            url = re.sub(r"\{(\w+)\}", lambda m: values.get(m[1], "0"), path)
            query = [p for p in methods["get"].get("parameters", []) if p["in"] == "query"]
            operations.append((url, query))
    assert len(operations) >= 25  # memories, search, conversations, agents, keys, tasks, tool calls, ...
    return operations


def _sample(parameter):
    """A value of the type the schema states (the check is of names; a value may still be refused)."""
    schema = parameter["schema"]
    schema = schema.get("items", schema)
    if "enum" in schema:
        return schema["enum"][0]
    if schema.get("format") in SAMPLE_BY_FORMAT:
        return SAMPLE_BY_FORMAT[schema["format"]]
    kind = schema.get("type")
    if kind == "boolean":
        return "true"
    if kind == "integer":
        return str(schema.get("minimum", 1))
    if kind is None:  # the JSON filter
        return "{}"
    return "agent-a" if parameter["name"].endswith("Id") else "x"


def _unknown_names(response):
    if response.status_code != 400:
        return set()
    return {
        name
        for name, messages in response.json()["details"].get("fields", {}).items()
        if any("unknown query parameter" in str(message) for message in messages)
    }


def test_every_get_refuses_each_unknown_parameter_by_name(admin_api, get_operations):
    wrong = []
    for url, _ in get_operations:
        for name in STRANGERS:
            response = admin_api.get(url, {name: "0.5"})
            body = response.json()
            if response.status_code != 400 or not body["error"].startswith(
                f"{name}: unknown query parameter"
            ):
                wrong.append((url, name, response.status_code, body))
            elif body["details"]["fields"].keys() != {name}:
                wrong.append((url, name, body["details"]))
    assert wrong == []


def test_every_get_takes_every_parameter_it_lists(admin_api, get_operations):
    """Each documented parameter is taken (sent with a sample value, and ``format``); sent with one unknown
    parameter more, only that one is named."""
    wrong = []
    for url, query in get_operations:
        params = {p["name"]: _sample(p) for p in query} | {"format": "json"}
        refused = _unknown_names(admin_api.get(url, params))
        named = _unknown_names(admin_api.get(url, {**params, "top_k": "5"}))
        if refused or named != {"top_k"}:
            wrong.append((url, sorted(params), refused, named))
    assert wrong == []


def test_search_with_min_score_is_pointed_to_min_score(agent_a_api):
    agent_a_api.put(ENTRIES, {"userId": "u1", "key": "lang", "value": "German"}, format="json")
    url = f"{ENTRIES}/u1/search"
    answer = assert_envelope(agent_a_api.get(url, {"q": "German", "min_score": "0.99"}), 400, "bad_request")
    assert answer["error"] == "min_score: unknown query parameter; did you mean minScore?"
    assert answer["details"] == {"fields": {"min_score": ["unknown query parameter; did you mean minScore?"]}}
    found = agent_a_api.get(url, {"q": "German", "mode": "hybrid", "minScore": "0.01"})
    assert found.status_code == 200, found.content
    assert [entry["key"] for entry in found.json()] == ["lang"]


@pytest.mark.parametrize(
    ("path", "name", "meant"),
    [
        (f"{ENTRIES}/u1/search", "top_k", "limit"),
        (f"{ENTRIES}/u1/visible", "threshold", "minScore"),
        (f"{ENTRIES}/u1", "threshold", "minConfidence"),  # the list has no minScore
        ("/v1/conversations/search", "k", "limit"),
        ("/v1/activity/tool-calls", "agent_id", "agentId"),
        ("/v1/agents", "statuss", "status"),
        ("/v1/tasks", "assignee", "assigneeId"),
    ],
)
def test_the_parameter_meant_is_named(agent_a_api, path, name, meant):
    answer = assert_envelope(agent_a_api.get(path, {"q": "x", name: "1"}), 400, "bad_request")
    assert answer["details"]["fields"][name] == [f"unknown query parameter; did you mean {meant}?"]


def test_conversation_reads_refuse_unknown_parameters(agent_a_api):
    conversation = create(agent_a_api)
    for path, name in [
        (f"{BASE}/{conversation}/messages", "page_size"),
        (f"{BASE}/{conversation}/context", "minscore"),
        (f"{BASE}/{conversation}", "expand"),
    ]:
        answer = assert_envelope(agent_a_api.get(path, {name: "1"}), 400, "bad_request")
        assert answer["error"].startswith(f"{name}: unknown query parameter"), answer
    assert agent_a_api.get(f"{BASE}/{conversation}/messages", {"limit": "5"}).status_code == 200


def test_every_unknown_parameter_is_named_and_a_name_without_a_near_one_has_no_hint(agent_a_api):
    answer = assert_envelope(
        agent_a_api.get(f"{ENTRIES}/u1", {"limit": "5", "cacheBuster": "1", "zebra": "key"}),
        400,
        "bad_request",
    )
    assert answer["details"]["fields"] == {
        "cacheBuster": ["unknown query parameter."],
        "zebra": ["unknown query parameter."],
    }


def test_format_is_taken_by_every_get(agent_a_api):
    assert agent_a_api.get(f"{ENTRIES}/u1", {"format": "json"}).status_code == 200
    browsable = agent_a_api.get("/v1/agents/me", {"format": "api"})
    assert browsable.status_code == 200
    assert browsable["Content-Type"].startswith("text/html")


def test_the_names_are_checked_whoever_asks(anon_api, viewer_api):
    """The parameters are public (the schema lists them): the check comes before the key's."""
    for client in (anon_api, viewer_api):
        answer = assert_envelope(client.get("/v1/groups", {"top_k": "3"}), 400, "bad_request")
        assert answer["error"] == "top_k: unknown query parameter; did you mean limit?"
    assert_envelope(anon_api.get("/v1/groups", {"limit": "3"}), 401, "unauthorized")


def test_pages_outside_the_rest_api_keep_their_query_strings(client, admin_user):
    assert client.get("/healthz", {"verbose": "1"}).status_code == 200
    assert client.get("/api/schema/", {"format": "json", "lang": "en"}).status_code == 200
    assert client.get("/api/docs/", {"x": "1"}).status_code == 200
    client.force_login(admin_user)
    assert client.get("/admin/usermemory/memoryentry/", {"q": "x", "o": "1"}).status_code == 200


# --- A parameter given twice (issue 53, finding 10) --------------------------------------------------------


def _repeated_names(response):
    if response.status_code != 400:
        return set()
    return {
        name
        for name, messages in response.json()["details"].get("fields", {}).items()
        if any("this query parameter takes one value" in str(message) for message in messages)
    }


def test_every_get_refuses_a_parameter_given_twice_unless_it_is_a_list(admin_api, get_operations):
    """Each parameter an operation lists, given twice with its sample value: a 400 naming it, unless the
    operation declares it a list (``groupId``, ``category``, ``keyPattern``), which takes both."""
    wrong = []
    lists = 0
    for url, query in get_operations:
        for parameter in query:
            name, value = parameter["name"], _sample(parameter)
            named = _repeated_names(admin_api.get(f"{url}?{urlencode([(name, value), (name, value)])}"))
            is_list = parameter["schema"].get("type") == "array"
            lists += is_list
            if named != (set() if is_list else {name}):
                wrong.append((url, name, named))
    assert wrong == [] and lists >= 5


def test_a_filter_and_a_threshold_given_twice_are_refused_not_dropped(agent_a_api):
    """``visibility=self&visibility=global`` read as its last value dropped the first filter, and
    ``minScore=0.99&minScore=0`` the threshold: each is a 400 in the envelope, naming the parameter."""
    agent_a_api.put(ENTRIES, {"userId": "u1", "key": "lang", "value": "German"}, format="json")
    cases = [
        (f"{ENTRIES}/u1/visible", "q=German&visibility=self&visibility=global", "visibility"),
        (f"{ENTRIES}/u1/search", "q=German&mode=hybrid&minScore=0.99&minScore=0", "minScore"),
    ]
    for path, query, name in cases:
        answer = assert_envelope(agent_a_api.get(f"{path}?{query}"), 400, "bad_request")
        assert answer["details"] == {
            "fields": {name: ["given 2 times; this query parameter takes one value."]}
        }
    both = agent_a_api.get(f"{ENTRIES}/u1/visible?q=German&category=fact&category=preference")
    assert both.status_code == 200, both.content  # a list takes each value
