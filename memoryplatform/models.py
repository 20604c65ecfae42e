"""The kernel's tables: those of the vector machinery every kind of stored text shares
(:mod:`memoryplatform.embeddings`).

They have one owner, the kernel, which alone writes them: the queue (``QueuedForVector``'s rows, filled by
each app's triggers and claimed, backed off and emptied by :mod:`memoryplatform.embeddings.store`) and the
record of the re-embedding passes (:class:`VectorSweep`). An app declares its kind's concrete tables (the
queue and the vectors, each keyed by the app's own row, so the database cascades its deletes) on these
abstract bases and hands them to the kernel as a :class:`memoryplatform.embeddings.jobs.VectorKind`: the
queue by its model, never by a table's name, and the vectors through its own store's statements
(``VectorKind.write``), since what "stale" means is the app's (its text)."""

from django.db import models
from django.db.models.functions import Now
from pgvector.django import HalfVectorField


class StoredEmbedding(models.Model):
    """The vector of one stored text, as one model computed it.

    ``model`` and ``dimensions`` say which embedder made it: a vector of another model than the configured one
    is stale, and ``manage.py embed --missing`` replaces it. ``text_hash`` is the SHA-256 (hex) of the text
    embedded, so a changed text is found stale by SQL alone. ``embedding`` has no fixed dimension, so a change
    of model needs no migration; it is a ``halfvec`` (16-bit floats: half the bytes of ``vector``, LoCoMo's
    quality unchanged within 0.005, bench/RESULTS.md session 12). No ANN index: a search computes exact
    distances over one user's visible rows, which an index on the whole table would not serve (it filters
    after the approximate scan). A concrete subclass adds the owner as its primary key (cascade on delete);
    conversation messages get a ``MessageEmbedding`` of the same shape.
    """

    model = models.CharField(max_length=200)
    dimensions = models.PositiveIntegerField()
    text_hash = models.CharField(max_length=64)
    embedding = HalfVectorField()
    embedded_at = models.DateTimeField()

    class Meta:
        abstract = True


class QueuedForVector(models.Model):
    """A stored text waiting for its vector: the queue that a write fills in its own transaction and the
    background consumer (:mod:`memoryplatform.embeddings.consumer`) empties.

    A database trigger queues the owner on every insert and on every change of its embedded text, whoever
    writes (the API, the admin, an import, plain SQL), and notifies channel ``memoryplatform_vectors`` as the
    write commits. ``queued_at`` is when it was (last) queued; ``not_before`` hides it from other consumers
    while one holds it (a lease) or after its embedder failed (a back-off); ``parked_at`` takes it out of the
    queue for good after EMBEDDINGS_MAX_ATTEMPTS claims that never came back (``last_error`` says so). A
    concrete subclass adds the owner as its primary key, with the database's ON DELETE CASCADE.
    """

    queued_at = models.DateTimeField(db_default=Now())
    not_before = models.DateTimeField(null=True, blank=True)
    # Claims that ended with no answer (the consumer died or hung while embedding it: a lease ran out). A
    # suspect is embedded alone; one that reaches EMBEDDINGS_MAX_ATTEMPTS is parked, with why, and never
    # claimed again until its text is written anew (the triggers reset all three).
    attempts = models.PositiveSmallIntegerField(db_default=0)
    parked_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True, db_default="")

    class Meta:
        abstract = True


class VectorSweep(models.Model):
    """The last pass of the re-embedding that reached the end for one kind of text (its table), and with which
    model. Once a pass has, every text of that kind has a vector of that model or is queued (the triggers
    queue every later insert and change), so the scheduled pass scans again only for another model;
    ``manage.py embed --missing`` always scans (after rows written past the triggers, say). It was
    usermemory's (its migration 0023); the kernel's since memoryplatform's migration 0001, which renamed its
    table."""

    kind = models.CharField(max_length=63, primary_key=True)
    model = models.CharField(max_length=300)
    completed_at = models.DateTimeField(db_default=Now())

    def __str__(self) -> str:
        return f"{self.kind}: {self.model}"


class ErasureFence(models.Model):
    """How far the primary's WAL had gone when the last GDPR erasure committed (one row, ``id`` 1): until a
    streaming replica has replayed that far, it may still hold the erased user's rows, and the doors routed
    to it read from the primary (:mod:`memoryplatform.replica`). Written by :func:`memoryplatform.store.
    erasure_fence_raise` only."""

    id = models.SmallIntegerField(primary_key=True, default=1)
    lsn = models.BigIntegerField()  # bytes of WAL: pg_current_wal_lsn() - '0/0'
    raised_at = models.DateTimeField(db_default=Now())

    class Meta:
        constraints = [models.CheckConstraint(condition=models.Q(id=1), name="erasurefence_one_row")]

    def __str__(self) -> str:
        return f"erasure fence at {self.lsn}"
