"""User memory entries (seed 002), their per-group index rows, history events and per-agent policies."""

from datetime import UTC, datetime

from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVector
from django.db import models
from django.db.models import F, Q
from django.db.models.functions import MD5, Now

from apikeys.models import Agent
from memoryplatform.models import QueuedForVector, StoredEmbedding

# The range of the times a caller gives (observedAt, validTo), checked at every door
# (usermemory.writerules.checked_time) and held by the database (the CHECK constraints below): a day inside
# Python's datetime range, so a stored time read in any time zone is still a datetime. PostgreSQL holds far
# more (4713 BC on), which no read could return.
EARLIEST_TIME = datetime(1, 1, 2, tzinfo=UTC)
LATEST_TIME = datetime(9999, 12, 30, tzinfo=UTC)


def in_time_range(column: str, *, nullable: bool = False) -> Q:
    """The condition of a CHECK constraint: ``column`` from :data:`EARLIEST_TIME` to :data:`LATEST_TIME`."""
    within = Q(**{f"{column}__gte": EARLIEST_TIME, f"{column}__lte": LATEST_TIME})
    return Q(**{f"{column}__isnull": True}) | within if nullable else within


class Visibility(models.TextChoices):
    SELF = "self", "self"
    GROUP = "group", "group"
    GLOBAL = "global", "global"


class RecallOrder(models.TextChoices):
    MOST_RECENT = "most_recent", "most recent"
    MOST_ACCESSED = "most_accessed", "most accessed"


class SummarizeGroupBy(models.TextChoices):
    CATEGORY = "category", "category"
    KEY_PREFIX = "key_prefix", "key prefix"


class OnCapReached(models.TextChoices):
    REJECT = "reject", "reject"
    EVICT_OLDEST = "evict_oldest", "evict oldest"


MAX_KEY_CHARS = 255
MAX_SOURCE_CHARS = 200


class InsightSource(models.TextChoices):
    """The named sources of an entry; ``source`` may also hold free text."""

    USER_CORRECTION = "user_correction", "user correction"
    OBSERVED_PATTERN = "observed_pattern", "observed pattern"
    TASK_OUTCOME = "task_outcome", "task outcome"


DEFAULT_ALLOWED_CATEGORIES = ("preference", "fact", "context")


def default_allowed_categories() -> list[str]:
    return list(DEFAULT_ALLOWED_CATEGORIES)


class MemoryEntry(models.Model):
    """One fact about one user.

    The upsert key is (user, key) for ``global`` entries and (user, key, source agent) otherwise; two partial
    unique indexes enforce it, so concurrent upserts of one key never make two rows. ``group_ids`` is the
    entry's group list as the API returns it; :class:`MemoryEntryGroup` holds the same ids one per row, so
    "meets the given groups" is an indexed query on both databases.
    """

    user_id = models.CharField(max_length=255)
    key = models.CharField(max_length=MAX_KEY_CHARS)
    value = models.JSONField(null=True)
    value_text = models.TextField(
        blank=True, help_text="The value as searchable text: a string's content, else JSON."
    )
    # The per-user search reads these: key and value_text casefolded in Python (str.casefold: "STRASSE" finds
    # "straße"), which PostgreSQL before 18 cannot do. Every write of key or value_text writes them too.
    key_folded = models.TextField(blank=True, db_default="")
    text_folded = models.TextField(blank=True, db_default="")
    category = models.CharField(max_length=64)
    visibility = models.CharField(max_length=6, choices=Visibility.choices, default=Visibility.SELF)
    source_agent = models.ForeignKey(
        Agent, null=True, blank=True, on_delete=models.PROTECT, related_name="memories", db_index=False
    )
    group_ids = models.JSONField(default=list, blank=True)
    source_conversation_id = models.CharField(max_length=255, null=True, blank=True)  # noqa: DJ001 (null is "none")
    conflicted = models.BooleanField(default=False)
    # Entries of the user whose keys differ from this one's but mean the same, with another value: Dream's
    # contradictions by meaning (dream.meaning), both sides of each pair. Read only where conflicted is set.
    meaning_conflicts = ArrayField(models.BigIntegerField(), default=list, db_default=[], blank=True)
    access_count = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()
    last_accessed_at = models.DateTimeField(null=True, blank=True)
    # Validity in time. An entry is current (recall, search, list... show it) while it is not superseded and
    # its valid_to, if any, is ahead: usermemory.sql.base.CURRENT and usermemory.selectors.current_q.
    valid_from = models.DateTimeField(
        db_default=Now(), help_text="When the stored value became true: its write."
    )
    valid_to = models.DateTimeField(
        null=True, blank=True, help_text="Given on write, or set when Dream superseded the entry."
    )
    # Time order (issue 46): the time of what the value says. An extracted fact's is its message's time, a
    # write's is the write's (or the observedAt its caller gives), a staff correction's is its own. A write
    # observed before the stored value was is not written (usermemory.sql.write.upsert_with_event).
    observed_at = models.DateTimeField(
        db_default=Now(),
        help_text="When what the value says was observed: its message's time for an extracted fact, else "
        "its write's, or the observedAt the write gave. An older write does not replace it.",
    )
    ttl_seconds = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="The TTL its write gave: valid_to is the write plus this, and a refresh renews it",
    )
    # No database constraint: the batch deletes of Dream's pruning clear it themselves
    # (usermemory.sql.write.delete_entries), and the ORM's deletes set it null (GDPR erasure, deletes,
    # conflict resolution).
    superseded_by = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        db_constraint=False,
        related_name="supersedes",
        help_text="The Dream summary that replaced this entry; it is kept, hidden from reads by default.",
    )
    provenance = models.JSONField(
        null=True, blank=True, help_text="A Dream summary's sources: entries, agents, model, cost, run."
    )
    # Insights (seed 001): how sure the writer is (0 to 1; null: unsaid), and where the fact came from
    # (user_correction, observed_pattern, task_outcome, or free text; null: unsaid).
    confidence = models.FloatField(null=True, blank=True)
    source = models.CharField(max_length=MAX_SOURCE_CHARS, null=True, blank=True)  # noqa: DJ001 (null is "unsaid")

    class Meta:
        verbose_name = "memory"
        verbose_name_plural = "memories"
        constraints = [
            models.UniqueConstraint(
                fields=["user_id", "key"], condition=Q(visibility="global"), name="memory_global_upsert_key"
            ),
            models.UniqueConstraint(
                fields=["user_id", "key", "source_agent"],
                condition=~Q(visibility="global"),
                name="memory_agent_upsert_key",
            ),
            models.CheckConstraint(
                condition=Q(visibility="global") | Q(source_agent__isnull=False),
                name="memory_private_has_owner",
                violation_error_message="A self or group memory needs a source agent.",
            ),
            models.CheckConstraint(
                condition=Q(visibility__in=["self", "group", "global"]), name="memory_visibility_valid"
            ),
            models.CheckConstraint(
                condition=Q(confidence__isnull=True) | Q(confidence__gte=0, confidence__lte=1),
                name="memory_confidence_range",
                violation_error_message="confidence is between 0 and 1.",
            ),
            models.CheckConstraint(condition=in_time_range("observed_at"), name="memory_observed_at_range"),
            models.CheckConstraint(
                condition=in_time_range("valid_to", nullable=True), name="memory_valid_to_range"
            ),
        ]
        indexes = [
            # Recall, list and count for one user, newest first.
            models.Index(fields=["user_id", "-updated_at"], name="memory_user_recent_idx"),
            # Agent-owned entries: eviction (oldest first) and Dream's per-agent passes.
            models.Index(fields=["source_agent", "user_id", "updated_at"], name="memory_agent_user_idx"),
            models.Index(fields=["user_id", "category"], name="memory_user_category_idx"),
            models.Index(fields=["key", "user_id"], name="memory_key_user_idx"),
            models.Index(
                fields=["user_id", "key"], condition=Q(conflicted=True), name="memory_conflicted_idx"
            ),
            # Staff search across users: full-text, words and word prefixes (selectors.fulltext_match).
            # The 'simple' configuration only lowercases; a ranked search in a chosen language would add an
            # index of its own. The per-user search needs no index beyond the user's own.
            GinIndex(SearchVector("key", "value_text", config="simple"), name="memory_fulltext_idx"),
            #
            # No index holds access_count or last_accessed_at: every recall writes them, and with no index to
            # update (and fillfactor 80, migration 0005) PostgreSQL makes that a HOT update that leaves every
            # index, the full-text one included, untouched. most_accessed sorts one user's rows, found by
            # memory_user_recent_idx; Dream's stale pass finds an agent's rows by memory_agent_user_idx.
        ]

    def __str__(self) -> str:
        return f"{self.user_id}:{self.key} [{self.visibility}]"


class MemoryConflict(MemoryEntry):
    """The admin's view of conflicted (user, key) sets."""

    class Meta:
        proxy = True
        verbose_name = "conflict"
        verbose_name_plural = "conflicts"


class ConflictDismissal(models.Model):
    """Staff said two values of a user are not a conflict (two valid phone numbers): the pair (key and value
    text on each side, in order) is never flagged again by Dream, by key or by meaning. A third value is
    another pair, and is flagged."""

    user_id = models.CharField(max_length=255)
    key_a = models.CharField(max_length=MAX_KEY_CHARS)
    text_a = models.TextField()
    key_b = models.CharField(max_length=MAX_KEY_CHARS)
    text_b = models.TextField()
    dismissed_by = models.CharField(max_length=150, blank=True, help_text="the staff user or key")
    created_at = models.DateTimeField(db_default=Now())

    class Meta:
        indexes = [models.Index(fields=["user_id"], name="memory_dismissal_user_idx")]
        constraints = [
            models.CheckConstraint(
                condition=Q(key_a__lt=F("key_b")) | Q(key_a=F("key_b"), text_a__lt=F("text_b")),
                name="memory_dismissal_ordered",
            ),
            # Texts run to 4,000 characters, past a btree entry's limit: unique on their digests.
            models.UniqueConstraint(
                F("user_id"),
                F("key_a"),
                MD5("text_a"),
                F("key_b"),
                MD5("text_b"),
                name="memory_dismissal_unique",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user_id}: {self.key_a}={self.text_a[:20]} / {self.key_b}={self.text_b[:20]}"


class UserDataRequest(MemoryEntry):
    """The admin's GDPR page: export or erase one user's data."""

    class Meta:
        proxy = True
        verbose_name = "GDPR request"
        verbose_name_plural = "GDPR: export or erase a user"


class MemoryEntryGroup(models.Model):
    """One (entry, group) pair: the index behind the ``group`` visibility test."""

    entry = models.ForeignKey(
        MemoryEntry, on_delete=models.CASCADE, related_name="group_rows", db_index=False
    )
    user_id = models.CharField(max_length=255)
    group_id = models.CharField(max_length=64)

    class Meta:
        # user_id last: the entry leads, as the entry's foreign key needs (no index of its own), and the key
        # holds user_id, as Citus needs of a unique key on a table distributed by it (docs/scaling.md).
        constraints = [
            models.UniqueConstraint(fields=["entry", "group_id", "user_id"], name="memory_group_unique")
        ]
        indexes = [models.Index(fields=["user_id", "group_id"], name="memory_group_user_idx")]

    def __str__(self) -> str:
        return f"{self.entry_id} in {self.group_id}"


class MemoryEvent(models.Model):
    """History: every change to an entry, with who made it and the old and new value.

    Each event also records who could see each value when it was written: the entry's owner, and its
    visibility and groups before the change (``old_*``, for ``old_value``) and after it (for ``new_value``).
    An agent's history shows only the values it could see then (:func:`usermemory.selectors.memory_history`).
    An event with no entry left to copy them from (one written before they were recorded) has the most
    restrictive scope: ``self`` of no agent.
    """

    class Action(models.TextChoices):
        CREATED = "created", "created"
        UPDATED = "updated", "updated"
        DELETED = "deleted", "deleted"
        EVICTED = "evicted", "evicted"
        PRUNED = "pruned", "pruned"
        FLAGGED = "flagged", "flagged"
        UNFLAGGED = "unflagged", "unflagged"
        RESOLVED = "resolved", "resolved"
        SUPERSEDED = "superseded", "superseded"
        ERASED = "erased", "erased"

    class ActorType(models.TextChoices):
        AGENT = "agent", "agent"
        KEY = "key", "key"
        STAFF = "staff", "staff"
        DREAM = "dream", "dream"

    # No database constraint: the history of an entry outlives the entry (deleted, evicted, pruned).
    entry = models.ForeignKey(
        MemoryEntry,
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        db_index=False,
        related_name="events",
    )
    user_id = models.CharField(max_length=255)
    key = models.CharField(max_length=MAX_KEY_CHARS, blank=True)
    action = models.CharField(max_length=10, choices=Action.choices)
    actor_type = models.CharField(max_length=5, choices=ActorType.choices)
    actor_id = models.CharField(
        max_length=150, blank=True, help_text="agent id, key prefix, username or run id"
    )
    key_prefix = models.CharField(max_length=16, blank=True)
    old_value = models.JSONField(null=True, blank=True)
    new_value = models.JSONField(null=True, blank=True)
    owner = models.CharField(
        max_length=64, blank=True, help_text="the entry's source agent when the event was written, if any"
    )
    old_visibility = models.CharField(max_length=6, choices=Visibility.choices, default=Visibility.SELF)
    old_group_ids = models.JSONField(default=list, blank=True)
    visibility = models.CharField(max_length=6, choices=Visibility.choices, default=Visibility.SELF)
    group_ids = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(db_index=True)
    provenance = models.JSONField(
        null=True,
        blank=True,
        help_text="Where the new value came from, when a door says so: an extracted fact's source, "
        "confidence, conversation, messages, model and prompt version.",
    )
    observed_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="A write's: when what the new value says was observed (the entry's observed_at then).",
    )
    valid_to = models.DateTimeField(
        null=True,
        blank=True,
        help_text="A write's: until when its value holds (the entry's valid_to, renewed with its TTL); "
        "null: until changed. A read as of a later time does not show it.",
    )

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=in_time_range("observed_at", nullable=True), name="memory_event_observed_at_range"
            ),
            models.CheckConstraint(
                condition=in_time_range("valid_to", nullable=True), name="memory_event_valid_to_range"
            ),
        ]
        indexes = [
            models.Index(fields=["entry_id", "created_at"], name="memory_event_entry_idx"),
            models.Index(fields=["user_id"], name="memory_event_user_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.action} {self.user_id}:{self.key}"


class TurnWriteCount(models.Model):
    """How many memory writes an agent made for a user in one turn (``X-Turn-Id``, or a 60 s window)."""

    # No index of its own: the unique constraint below leads with the agent. Every upsert inserts a row here,
    # and the two indexes Django adds to a foreign key (one for LIKE) made each insert about 5 % slower.
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="+", db_index=False)
    user_id = models.CharField(max_length=255)
    turn_id = models.CharField(max_length=128, blank=True)
    window_start = models.DateTimeField()
    count = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["agent", "user_id", "turn_id"], name="turn_write_count_unique"),
        ]
        indexes = [models.Index(fields=["window_start"], name="turn_write_window_idx")]

    def __str__(self) -> str:
        return f"{self.agent_id}/{self.user_id}/{self.turn_id or 'window'}: {self.count}"


class AgentMemoryPolicy(models.Model):
    """Usermemory's part of an agent's ``userMemoryConfig`` (seed 002): caps, recall, guardrails, and when two
    keys mean the same. The apps above keep their own parts, one-to-one with the agent in their own tables
    (``dream.DreamPolicy``, ``extraction.ExtractionPolicy``, ``activity.ActivityPolicy``), and register them
    (:mod:`usermemory.policies`): over REST and in the admin they are one policy."""

    agent = models.OneToOneField(
        Agent, primary_key=True, on_delete=models.CASCADE, related_name="memory_policy"
    )
    max_entries_per_user = models.PositiveIntegerField(default=500)
    max_recall_entries = models.PositiveIntegerField(default=50)
    recall_top_k = models.PositiveIntegerField(
        default=5,
        help_text="A recall by relevance (/visible?q=, /context?q=, searchMemory, MCP search) returns the "
        "best this many the agent may read, with no score cut unless the caller gives minScore; at most "
        "max_recall_entries",
    )
    recall_order = models.CharField(
        max_length=16, choices=RecallOrder.choices, default=RecallOrder.MOST_RECENT
    )
    on_cap_reached = models.CharField(
        max_length=16, choices=OnCapReached.choices, default=OnCapReached.EVICT_OLDEST
    )
    max_key_length = models.PositiveIntegerField(default=100)
    max_value_length = models.PositiveIntegerField(default=1000)
    max_writes_per_turn = models.PositiveIntegerField(default=10)
    allowed_categories = models.JSONField(default=default_allowed_categories, blank=True)
    semantic_contradiction_threshold = models.FloatField(
        default=0.96,
        help_text="Cosine similarity from which two keys of one user mean the same thing: for Dream's "
        "contradictions by meaning and extraction's matching of a fact's key (usermemory.keynames)",
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "memory policy"
        verbose_name_plural = "memory policies"

    def __str__(self) -> str:
        return f"memory policy of {self.agent_id}"


class PendingEntryVector(QueuedForVector):
    """A memory entry whose vector is pending (:class:`QueuedForVector`)."""

    entry = models.OneToOneField(
        MemoryEntry,
        primary_key=True,
        on_delete=models.DO_NOTHING,
        related_name="pending_vector",
        db_constraint=False,
    )

    class Meta:
        indexes = [
            models.Index(fields=["queued_at"], name="um_pending_vector_queued"),
            models.Index(
                fields=["queued_at"],
                name="um_pending_vector_suspect",
                condition=models.Q(attempts__gt=0, parked_at__isnull=True),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.entry_id} queued {self.queued_at}"


class EntryEmbedding(StoredEmbedding):
    """The vector of a memory entry's ``"key: value text"`` (usermemory.embedding.embedding_text). Deleting
    the entry (a delete, forget, GDPR erasure, eviction, Dream) deletes it, by the database's cascade."""

    # The foreign key is the database's, ON DELETE CASCADE (migration 0010), so the raw deletes of the stores
    # (Dream's pruning) remove vectors too; Django's own cascade covers the ORM's deletes.
    entry = models.OneToOneField(
        MemoryEntry, primary_key=True, on_delete=models.CASCADE, related_name="embedding", db_constraint=False
    )

    def __str__(self) -> str:
        return f"{self.entry_id} [{self.model}]"
