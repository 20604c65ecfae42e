"""Vectors of conversation messages: their kind of text for :mod:`memoryplatform.embeddings.jobs`, which holds
the rules they share with memory entries (the same embedder and model id, the same inline and background
rules, the same fallback and backfill).

A history or case-log message's vector is of its text with the turn before it on its channel as context
(:mod:`conversations.store`): ``"user: where is my parcel?\\nassistant: it left Lisbon on Monday"``, so an
answer is found by the question it answers. A write's messages are queued in its transaction (a trigger)
and get their vectors from the background consumer, never in its statements; with
EMBEDDINGS_INLINE_MAX_CHARS, the short ones also in the request after the commit. The memory channel gets
none (it repeats the history): it is found by its words.
"""

from collections.abc import Sequence

from prometheus_client import Counter, Gauge

from conversations import store
from conversations.models import Message, PendingMessageVector
from memoryplatform.embeddings import jobs
from memoryplatform.embeddings.store import QueueTable

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
    "Conversation messages waiting for their vector: the queue's length (read at each scrape of "
    "/metrics), or during a re-embedding pass, what it has left.",
    multiprocess_mode="mostrecent",
)


MESSAGES = jobs.VectorKind(
    name="conversation messages",
    lock_key=Message._meta.db_table,
    pending=store.message_vectors_pending,
    pending_count=store.message_vectors_pending_count,
    write=store.message_vectors_write,
    queue=QueueTable.of(PendingMessageVector),
    embedded=messages_embedded,
    failures=message_embedding_failures,
    backlog=message_embeddings_pending,
)


def message_embeddings_schedule(*, messages: Sequence[store.AnyMessage]) -> None:
    """After the current transaction commits, get these messages their vectors, off the write statements
    (those of the memory channel, and those without text, get none)."""
    jobs.schedule(kind=MESSAGES, ids=[str(m.id) for m in messages if m.channel in store.EMBEDDED_CHANNELS])
