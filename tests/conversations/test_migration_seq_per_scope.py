"""Migration 0008 (issue 44, finding 12) renumbers stored messages within their scopes (the history, the case
log, each agent's memory stream), keeps the conversation-wide number as ``position``, moves case-log
checkpoints to their message's new number, and loses nothing; backwards, every number is as it was. Then the
REST door goes on from there: new numbers follow each scope's last, and cursors page."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from conversations.models import Checkpoint, Message
from extraction.models import ExtractionWatermark
from tests.conversations.utils import BASE, listing, say, text

BEFORE = [("conversations", "0007_vector_queue_parking")]
# (seq before, channel, author): agent-a's memory between the shared messages, agent-b's too.
STORED = [
    (1, "history", None),
    (2, "memory", "agent-a"),
    (3, "memory", "agent-b"),
    (4, "summary", "agent-a"),
    (5, "history", "agent-a"),
    (6, "memory", "agent-a"),
    (7, "summary", "agent-b"),
]


def migrate(targets):
    """Migrate to ``targets`` (``None``: the latest); the models as they were there."""
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets or executor.loader.graph.leaf_nodes())
    return executor.loader.project_state(targets).apps if targets else None


def _numbers(conversation_id: str) -> list[tuple[int, int, str]]:
    rows = Message.objects.filter(conversation_id=conversation_id).order_by("position")
    return list(rows.values_list("position", "seq", "channel"))


@pytest.mark.django_db(transaction=True)
def test_stored_messages_are_renumbered_per_scope_and_back(agent_a, agent_b, agent_a_api, agent_b_api):
    models = migrate(BEFORE)
    try:
        conversation = models.get_model("conversations", "Conversation").objects.create(
            user_id="user-old", next_seq=len(STORED) + 1
        )
        message = models.get_model("conversations", "Message")
        ids = {}
        for seq, channel, author in STORED:
            ids[seq] = message.objects.create(
                conversation_id=conversation.id,
                seq=seq,
                channel=channel,
                role="assistant" if author else "user",
                agent_id=author,
                memory_epoch=1 if channel == "memory" else None,
                content=text(f"{channel} {seq}"),
            ).id
        models.get_model("conversations", "Checkpoint").objects.create(
            conversation_id=conversation.id, agent_id="agent-b", last_message_id=ids[4], last_seq=4
        )
        ExtractionWatermark.objects.create(  # extraction's table, which 0008 leaves as it is
            conversation_id=conversation.id, agent_id="agent-a", last_seq=5, updated_at="2026-01-01T00:00Z"
        )
    finally:
        migrate(None)
    cid = str(conversation.id)
    assert _numbers(cid) == [
        (1, 1, "history"),
        (2, 1, "memory"),  # agent-a's first
        (3, 1, "memory"),  # agent-b's first
        (4, 1, "summary"),
        (5, 2, "history"),
        (6, 2, "memory"),  # agent-a's second
        (7, 2, "summary"),
    ]
    assert Checkpoint.objects.get().last_seq == 1  # its message's new number
    assert ExtractionWatermark.objects.get().last_seq == 5  # a position: it was one already

    # Through REST: new numbers follow each scope's last; the checkpoint reads the case log after it.
    assert say(agent_b_api, cid, "next", role="assistant")["seq"] == 3
    assert say(agent_a_api, cid, "a's next", channel="memory")["seq"] == 3
    assert say(agent_b_api, cid, "b's next", channel="memory")["seq"] == 2
    history = listing(agent_b_api, cid, channel="history")["data"]
    assert [m["seq"] for m in history] == [1, 2, 3]
    after = listing(agent_b_api, cid, channel="history", after=history[0]["id"])["data"]
    assert [m["seq"] for m in after] == [2, 3]
    context = agent_b_api.get(f"{BASE}/{cid}/context").json()
    assert [m["seq"] for m in context["caseLog"]["data"]] == [2]

    # Backwards: every message and checkpoint has its conversation-wide number again.
    old = migrate(BEFORE)
    try:
        rows = old.get_model("conversations", "Message").objects.filter(conversation_id=cid).order_by("seq")
        assert list(rows.values_list("seq", "channel")) == [
            *((seq, channel) for seq, channel, _ in STORED),
            (8, "history"),
            (9, "memory"),
            (10, "memory"),
        ]
        assert old.get_model("conversations", "Checkpoint").objects.get().last_seq == 4
    finally:
        migrate(None)
