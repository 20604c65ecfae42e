"""Migration 0003 computes every stored message's search vector within the same bound as new ones, so a
message written before it, however long, cannot make a search fail afterwards (issue 33, finding 1)."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from tests.conversations.test_api_search import HUGE, URL

BEFORE = [("conversations", "0002_message_session_optional_agent_always_set")]


def migrate(targets):
    """Migrate to ``targets`` (``None``: the latest); the models as they were there."""
    executor = MigrationExecutor(connection)
    executor.migrate(targets or executor.loader.graph.leaf_nodes())
    return executor.loader.project_state(targets).apps if targets else None


@pytest.mark.django_db(transaction=True)
def test_a_huge_message_stored_before_the_migration_is_backfilled_in_part(agent_a, agent_a_api, viewer_api):
    models = migrate(BEFORE)
    try:  # the models of then (a later migration adds columns)
        conversation = models.get_model("conversations", "Conversation").objects.create(user_id="user-old")
        models.get_model("conversations", "Message").objects.create(
            conversation=conversation,
            seq=1,
            channel="history",
            role="user",
            agent_id=agent_a.id,
            content=[{"type": "text", "text": " ".join(HUGE)}],
        )
    finally:
        migrate(None)
    for client in (agent_a_api, viewer_api):
        for word, hits in ((HUGE[0], 1), (HUGE[10_000], 1), (HUGE[12_000], 0)):
            response = client.get(URL, {"q": word})
            assert response.status_code == 200, response.content[:300]
            assert len(response.json()["data"]) == hits
