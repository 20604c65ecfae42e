"""The OpenAPI schema states each operation's real parameters and bounds, so a fuzzer (CI's schemathesis run)
reaches the code behind the validation instead of being refused at it (issue 16)."""

import pytest

from memoryplatform.api.pagination import MAX_OFFSET


@pytest.fixture
def schema(client, db):
    response = client.get("/api/schema/", HTTP_ACCEPT="application/json")
    assert response.status_code == 200
    return response.json()


def _query(schema, path, method="get"):
    return {p["name"]: p for p in schema["paths"][path][method]["parameters"] if p["in"] == "query"}


def _component(schema, ref):
    return schema["components"]["schemas"][ref["$ref"].rsplit("/", 1)[1]]


@pytest.mark.parametrize(
    "path",
    [
        "/usermemorystore/memories/{user_id}",
        "/usermemorystore/memories/{user_id}/category/{category}",
        "/usermemorystore/memories/{user_id}/search",
        "/v1/memories/search",
    ],
)
def test_memory_lists_state_their_bounds(schema, path):
    query = _query(schema, path)
    assert query["limit"]["schema"] | {"minimum": 1, "maximum": 1000} == query["limit"]["schema"]
    assert query["offset"]["schema"]["minimum"] == 0
    assert query["offset"]["schema"]["maximum"] == MAX_OFFSET


def test_search_states_its_required_query(schema):
    for path in ["/usermemorystore/memories/{user_id}/search", "/v1/memories/search"]:
        q = _query(schema, path)["q"]
        assert q["required"] is True
        assert q["schema"]["maxLength"] == 1000
    assert "groupId" not in _query(schema, "/v1/memories/search")  # staff search has no group context


def test_recall_and_group_reads_state_their_parameters(schema):
    visible = _query(schema, "/usermemorystore/memories/{user_id}/visible")
    assert visible["limit"]["schema"]["maximum"] == 1000
    assert visible["agentId"]["schema"]["maxLength"] == 64
    for path in [
        "/usermemorystore/memories/{user_id}/count",
        "/usermemorystore/memories/{user_id}/key/{key}",
    ]:
        assert _query(schema, path)["groupId"]["schema"]["items"]["maxLength"] == 64


def test_directory_pagination_states_its_bounds(schema):
    for path in ["/v1/agents", "/v1/groups"]:
        query = _query(schema, path)
        assert query["limit"]["schema"]["maximum"] == 500
        assert query["offset"]["schema"]["maximum"] == MAX_OFFSET


def test_request_bodies_state_ids_blocks_and_epochs(schema):
    agent = _component(
        schema, schema["paths"]["/v1/agents"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    )
    assert agent["properties"]["id"]["pattern"] == "^[a-z0-9][a-z0-9_-]{0,63}$"
    message = schema["components"]["schemas"]["MessageInputRequest"]
    content = message["properties"]["content"]
    assert content["minItems"] == 1
    assert content["items"]["required"] == ["type"]
    assert message["properties"]["memoryEpoch"]["maximum"] == 2**31 - 1
    assert "built once per thread" not in message.get("description", "")
