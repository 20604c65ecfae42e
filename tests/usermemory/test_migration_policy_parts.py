"""Migrations dream 0006, extraction 0004, activity 0005 and usermemory 0027 move each app's fields of an
agent's policy out of ``usermemory.AgentMemoryPolicy`` into the app's own table: the values stored before
are read back over REST unchanged after, and unapplied, the migrations put them back (issue 48)."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [
    ("usermemory", "0026_observed_at"),
    ("dream", "0005_key_vectors"),
    ("extraction", "0003_door_coverage_and_skipped_facts"),
    ("activity", "0004_llm_spend"),
]
# Every moved field with a value that is not its default, as the table held it before.
STORED = {
    "dream_enabled": True,
    "cross_agent_maintenance": True,
    "max_cost_per_run": "1.25",
    "max_llm_calls_per_run": 7,
    "max_llm_calls_per_user": 2,
    "prune_stale_after_days": 12,
    "prune_expired_after_days": 3,
    "summarize_interactions": True,
    "summarize_min_entries": 6,
    "summarize_target_entries": 2,
    "summarize_group_by": "key_prefix",
    "preserve_agent_provenance": False,
    "summarize_requires_approval": True,
    "detect_contradictions": False,
    "confirm_contradictions_with_llm": True,
    "extract_from_conversations": True,
    "max_extraction_cost_per_run": "0.75",
    "extraction_visibility": "group",
    "tool_call_retention_days": 4,
    "llm_budget": "1.50",
}


def migrate(targets):
    executor = MigrationExecutor(connection)
    executor.migrate(targets or executor.loader.graph.leaf_nodes())
    return executor.loader.project_state(targets or executor.loader.graph.leaf_nodes()).apps


def _stored_before(apps) -> dict:
    policy = apps.get_model("usermemory", "AgentMemoryPolicy")
    row = policy.objects.values(*STORED).get(agent_id="agent-a")
    return {
        name: str(value)
        if name in ("max_cost_per_run", "max_extraction_cost_per_run", "llm_budget")
        else value
        for name, value in row.items()
    }


@pytest.mark.django_db(transaction=True)
def test_each_apps_fields_move_to_its_own_table_and_back(admin_api, agent_a):
    old = migrate(BEFORE)
    try:
        old.get_model("usermemory", "AgentMemoryPolicy").objects.create(
            agent_id="agent-a", max_recall_entries=9, semantic_contradiction_threshold=0.9, **STORED
        )
    finally:
        migrate(None)

    policy = admin_api.get("/v1/agents/agent-a").json()["memoryPolicy"]
    assert policy["maxRecallEntries"] == 9
    assert policy["dreamConfig"] == {
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
    }
    assert policy["extractionConfig"] == {
        "extractFromConversations": True,
        "maxExtractionCostPerRun": 0.75,
        "visibility": "group",
    }
    assert (policy["toolCallRetentionDays"], policy["llmBudget"]) == (4, 1.5)

    # A change made after the move goes back with the others.
    admin_api.patch("/v1/agents/agent-a", {"memoryPolicy": {"toolCallRetentionDays": 5}}, format="json")
    old = migrate(BEFORE)
    try:
        assert _stored_before(old) == {**STORED, "tool_call_retention_days": 5}
    finally:
        migrate(None)
