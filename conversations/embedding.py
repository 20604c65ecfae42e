"""Vectors of conversation messages: their kind of text for :mod:`memoryplatform.embeddings.jobs`, which holds
the rules they share with memory entries (the same embedder and model id, the same inline and background
rules, the same fallback and backfill).

A history or case-log message's vector is of its text with the turn before it on its channel as context
(:mod:`conversations.store`): ``"user: where is my parcel?\\nassistant: it left Lisbon on Monday"``, so an
answer is found by the question it answers. A write's messages get theirs after it commits, never in its
statements: the short ones in the request with the local model, the rest by a Celery task or the process's
background thread. The memory channel gets none (it repeats the history): it is found by its words.
"""

from prometheus_client import Counter, Gauge

from conversations import store
from conversations.models import Message
from memoryplatform.embeddings import jobs

message_embedding_failures = Counter(
    "conversation_message_embedding_failures",
    "Conversation messages whose vector could not be computed when written (the embedder failed or was "
    "down).",
)
messages_embedded = Counter(
    "conversation_messages_embedded", "Conversation message vectors computed and stored."
)
message_embeddings_pending = Gauge(
    "conversation_message_embeddings_pending",
    "Conversation messages whose vector is missing, stale or of another model: counted when a re-embedding "
    "pass starts, less what it has done since.",
    multiprocess_mode="mostrecent",
)


def _enqueue(message_ids: list[str]) -> None:
    from conversations.tasks import embed_messages_task  # the task module imports this one

    embed_messages_task.delay(message_ids=message_ids)


MESSAGES = jobs.VectorKind(
    name="conversation messages",
    lock_key=Message._meta.db_table,
    pending=store.message_vectors_pending,
    pending_count=store.message_vectors_pending_count,
    write=store.message_vectors_write,
    enqueue=_enqueue,
    embedded=messages_embedded,
    failures=message_embedding_failures,
    backlog=message_embeddings_pending,
)


def message_embed(*, message_ids: list[str]) -> int:
    """Embed those of these messages whose vector is missing or stale (failures logged and counted, not
    raised). Returns the vectors written."""
    return jobs.embed_ids(kind=MESSAGES, ids=message_ids)


def message_embeddings_schedule(*, messages: list[Message]) -> None:
    """After the current transaction commits, get these messages their vectors, off the write statements
    (those of the memory channel, and those without text, get none)."""
    jobs.schedule(kind=MESSAGES, ids=[str(m.pk) for m in messages if m.channel in store.EMBEDDED_CHANNELS])
