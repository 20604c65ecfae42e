"""The OpenAPI document a newcomer opens: areas in order (the memory API first, the legacy properties last),
a summary on every operation, real examples, and the MCP endpoint described."""

import pytest


@pytest.fixture
def schema(admin_api):
    response = admin_api.get("/api/schema/", {"format": "json"})
    assert response.status_code == 200
    return response.json()


def _operations(schema):
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            if isinstance(operation, dict) and "responses" in operation:
                yield method, path, operation


def test_every_operation_has_a_summary_and_one_area(schema):
    tags = [tag["name"] for tag in schema["tags"]]
    assert tags[0] == "memories" and tags[-1] == "propertiesstore (legacy)"
    assert all(tag["description"] for tag in schema["tags"])
    assert [(m, p) for m, p, o in _operations(schema) if not o.get("summary")] == []
    assert [
        (m, p) for m, p, o in _operations(schema) if len(o.get("tags", [])) != 1 or o["tags"][0] not in tags
    ] == []
    # The docs open on the memory API: its paths come first, the legacy ones last.
    paths = list(schema["paths"])
    assert paths[0].startswith("/usermemorystore/") and paths[-1].startswith("/propertiesstore/")


def test_examples_are_real(schema):
    agent = schema["components"]["schemas"]["AgentOutput"]["properties"]["capabilities"]
    assert agent == {"type": "array", "items": {"type": "string"}, "description": "What the agent can do."}
    create = schema["paths"]["/v1/agents"]["post"]["requestBody"]["content"]["application/json"]["examples"]
    (example,) = create.values()
    assert example["value"]["capabilities"] == ["answer_tickets", "refunds"]
    detail = schema["paths"]["/v1/agents/{agent_id}"]["get"]["responses"]["200"]["content"][
        "application/json"
    ]
    assert detail["schema"]["$ref"].endswith("/AgentDetailOutput")


def test_the_mcp_endpoint_is_described(schema):
    assert "POST /mcp" in schema["info"]["description"]
    assert "tools/call" in schema["info"]["description"]
