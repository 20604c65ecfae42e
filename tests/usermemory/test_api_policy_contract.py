"""``memoryPolicy`` (EDDI's ``userMemoryConfig`` shape) is one document over REST, whatever tables hold it:
its OpenAPI schema, its answers to bad input and its writes hold to what they were when every field lived in
``usermemory.AgentMemoryPolicy`` (issue 48: Dream, extraction and activity each own their part since).

The snapshots in ``snapshots/`` were taken from the schema and the answers before the policy was split; a
change of the contract shows here as a diff, never silently."""

import json
from pathlib import Path

import pytest

from tests.helpers import assert_envelope

SNAPSHOTS = Path(__file__).parent / "snapshots"
URL = "/v1/agents/agent-a"


def _snapshot(name: str):
    return json.loads((SNAPSHOTS / name).read_text())


def test_the_policy_schema_is_the_contracts(admin_api):
    expected = _snapshot("memory_policy_schema.json")
    schema = admin_api.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    components = schema["components"]["schemas"]
    assert {name: components.get(name) for name in expected["components"]} == expected["components"]
    assert {path: schema["paths"].get(path) for path in expected["paths"]} == expected["paths"]


@pytest.mark.parametrize(
    "case", _snapshot("memory_policy_errors.json"), ids=lambda c: json.dumps(c["memoryPolicy"])
)
def test_bad_input_is_answered_as_before(admin_api, agent_a, case):
    response = admin_api.patch(URL, {"memoryPolicy": case["memoryPolicy"]}, format="json")
    assert (response.status_code, response.json()) == (case["status"], case["answer"])


def test_a_refused_part_leaves_every_part_unchanged(admin_api, agent_a):
    """One PATCH spans the apps' tables in one transaction: Dream's part refused, nothing of it is stored."""
    before = admin_api.get(URL).json()["memoryPolicy"]
    body = {
        "maxRecallEntries": 9,
        "recallTopK": 4,
        "guardrails": {"maxKeyLength": 20},
        "extractionConfig": {"visibility": "group"},
        "toolCallRetentionDays": 3,
        "llmBudget": 1.5,
        "dreamConfig": {"enabled": True, "summarizeTargetEntries": 20},
    }
    assert_envelope(admin_api.patch(URL, {"memoryPolicy": body}, format="json"), 400, "bad_request")
    assert admin_api.get(URL).json()["memoryPolicy"] == before


def test_every_part_is_written_and_read_back(admin_api, agent_a):
    """Each app's fields round-trip: a read with every part changed, sent back, reads the same."""
    body = {
        "maxEntriesPerUser": 40,
        "maxRecallEntries": 9,
        "recallTopK": 4,
        "recallOrder": "most_accessed",
        "onCapReached": "reject",
        "guardrails": {
            "maxKeyLength": 20,
            "maxValueLength": 300,
            "maxWritesPerTurn": 4,
            "allowedCategories": ["fact"],
        },
        "dreamConfig": {
            "enabled": True,
            "pruneStaleAfterDays": 12,
            "pruneExpiredAfterDays": 3,
            "detectContradictions": False,
            "summarizeInteractions": True,
            "maxCostPerRun": 1.25,
            "crossAgentMaintenance": True,
            "summarizeMinEntries": 6,
            "summarizeTargetEntries": 2,
            "summarizeGroupBy": "key_prefix",
            "preserveAgentProvenance": False,
            "summarizeRequiresApproval": True,
            "semanticContradictionThreshold": 0.9,
            "confirmContradictionsWithLlm": True,
            "maxLlmCallsPerRun": 7,
            "maxLlmCallsPerUser": 2,
        },
        "extractionConfig": {
            "extractFromConversations": True,
            "maxExtractionCostPerRun": 0.75,
            "visibility": "group",
        },
        "toolCallRetentionDays": 3,
        "llmBudget": 1.5,
    }
    response = admin_api.patch(URL, {"memoryPolicy": body}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["memoryPolicy"] == body
    assert admin_api.get(URL).json()["memoryPolicy"] == body
    again = admin_api.patch(URL, {"memoryPolicy": body}, format="json")
    assert again.json()["memoryPolicy"] == body
