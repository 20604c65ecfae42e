"""Migration 0003 computes every stored message's search vector within the same bound as new ones, so a
message written before it, however long, cannot make a search fail afterwards (issue 33, finding 1)."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from conversations.models import Conversation, Message
from tests.conversations.test_api_search import HUGE, URL

BEFORE = [("conversations", "0002_message_session_optional_agent_always_set")]


def migrate(targets):
    executor = MigrationExecutor(connection)
    executor.migrate(targets or executor.loader.graph.leaf_nodes())


@pytest.mark.django_db(transaction=True)
def test_a_huge_message_stored_before_the_migration_is_backfilled_in_part(agent_a, agent_a_api, viewer_api):
    migrate(BEFORE)
    try:
        conversation = Conversation.objects.create(user_id="user-old")
        Message.objects.create(
            conversation=conversation,
            seq=1,
            channel="history",
            role="user",
            agent=agent_a,
            content=[{"type": "text", "text": " ".join(HUGE)}],
        )
    finally:
        migrate(None)
    for client in (agent_a_api, viewer_api):
        for word, hits in ((HUGE[0], 1), (HUGE[10_000], 1), (HUGE[12_000], 0)):
            response = client.get(URL, {"q": word})
            assert response.status_code == 200, response.content[:300]
            assert len(response.json()["data"]) == hits
