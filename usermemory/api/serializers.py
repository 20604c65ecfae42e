"""EDDI's field names (camelCase) in and out. Input serializers check types only; services hold the rules."""

import math
from collections.abc import Mapping
from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from memoryplatform import publicids
from memoryplatform.api.pagination import MAX_OFFSET
from memoryplatform.api.serializers import (
    AsciiIntegerField,
    PublicIdField,
    StrictCharField,
    StrictInput,
    iso_utc,
    validator,
)
from memoryplatform.text import MAX_QUERY_CHARS
from usermemory.history import provenance_shown
from usermemory.models import (
    MAX_KEY_CHARS,
    MAX_SOURCE_CHARS,
    MemoryEntry,
    MemoryEvent,
    RecallOrder,
    Visibility,
)
from usermemory.ranking import RANKED_MODES, SEARCH_MODES
from usermemory.selectors import value_conditions
from usermemory.services import MAX_TTL_REFRESH, MAX_TTL_SECONDS, MemoryWrite, Skipped, UpsertResult
from usermemory.sql.base import AnyEntry
from usermemory.sql.search import Filters, ScoredEntry


class MemoryEntryOutputSerializer(serializers.ModelSerializer):
    id = PublicIdField(publicids.ENTRY)
    userId = serializers.CharField(source="user_id")
    value = serializers.JSONField()
    sourceAgentId = serializers.CharField(source="source_agent_id", allow_null=True)
    groupIds = serializers.ListField(source="group_ids", child=serializers.CharField())
    sourceConversationId = serializers.CharField(source="source_conversation_id", allow_null=True)
    accessCount = serializers.IntegerField(source="access_count")
    createdAt = serializers.DateTimeField(source="created_at")
    updatedAt = serializers.DateTimeField(source="updated_at")
    lastAccessedAt = serializers.DateTimeField(source="last_accessed_at", allow_null=True)
    validFrom = serializers.DateTimeField(source="valid_from")
    validTo = serializers.DateTimeField(
        source="valid_to", allow_null=True, help_text="Given on write, or when a Dream summary superseded it."
    )
    supersededBy = PublicIdField(
        publicids.ENTRY,
        source="superseded_by_id",
        allow_null=True,
        help_text="The id of the Dream summary that replaced it.",
    )
    confidence = serializers.FloatField(allow_null=True, help_text="0 to 1; null: unsaid.")
    source = serializers.CharField(  # type: ignore[assignment]  # a declared field: DRF takes it off the class
        allow_null=True, help_text="Where the fact came from; null: unsaid."
    )
    observedAt = serializers.DateTimeField(
        source="observed_at",
        help_text="When what the value says was observed: an extracted fact's message's time, else the "
        "write's, or the observedAt it gave. A write observed earlier does not replace the value.",
    )

    class Meta:
        model = MemoryEntry
        fields = [
            "id",
            "userId",
            "key",
            "value",
            "category",
            "visibility",
            "sourceAgentId",
            "groupIds",
            "sourceConversationId",
            "conflicted",
            "accessCount",
            "createdAt",
            "updatedAt",
            "lastAccessedAt",
            "validFrom",
            "validTo",
            "supersededBy",
            "confidence",
            "source",
            "observedAt",
        ]

    def to_representation(self, instance: AnyEntry) -> dict[str, Any]:
        """The declared fields above, built directly: recall and list render many entries per request, and
        DRF's field-by-field path costs several times more. A test holds the two to the same output. A plain
        recall's entries are rows (:class:`usermemory.sql.base.EntryRow`), with the same attribute names."""
        return {
            "id": publicids.public_str(publicids.ENTRY, instance.id),
            "userId": instance.user_id,
            "key": instance.key,
            "value": instance.value,
            "category": instance.category,
            "visibility": instance.visibility,
            "sourceAgentId": instance.source_agent_id,
            "groupIds": instance.group_ids,
            "sourceConversationId": instance.source_conversation_id,
            # An agent key's read annotates the flag it may see (usermemory.selectors.visible_conflict);
            # recall and search return that in the conflicted column itself.
            "conflicted": getattr(instance, "visible_conflict", instance.conflicted),
            "accessCount": instance.access_count,
            "createdAt": iso_utc(instance.created_at),
            "updatedAt": iso_utc(instance.updated_at),
            "lastAccessedAt": iso_utc(instance.last_accessed_at),
            "validFrom": iso_utc(instance.valid_from),
            "validTo": iso_utc(instance.valid_to),
            "supersededBy": publicids.public_str(publicids.ENTRY, instance.superseded_by_id),
            "confidence": instance.confidence,
            "source": instance.source,
            "observedAt": iso_utc(instance.observed_at),
        }


class ScoredMemoryEntryOutputSerializer(MemoryEntryOutputSerializer):
    """An entry of a read ranked by relevance (search in ``semantic`` or ``hybrid`` mode, recall with ``q``),
    rendered from a :class:`usermemory.sql.search.ScoredEntry`: the entry, and its score. In the schema
    ``score`` is optional: the same paths answer unranked reads (keyword search, recall without ``q``) with
    plain entries."""

    score = serializers.FloatField(
        required=False,
        help_text="Only in a read ranked by relevance (mode semantic or hybrid; recall with q): the "
        "probability that the entry is relevant to q, from 0 to 1, on one scale for every query and store "
        "(minScore compares against it); the reranker's probability when one is configured.",
    )

    class Meta(MemoryEntryOutputSerializer.Meta):
        fields = [*MemoryEntryOutputSerializer.Meta.fields, "score"]

    def to_representation(self, instance: ScoredEntry) -> dict[str, Any]:  # type: ignore[override]  # a scored entry, not a model instance
        return {**super().to_representation(instance.entry), "score": instance.score}


class SkippedWriteSerializer(serializers.Serializer):
    reason = serializers.CharField()
    observedAt = serializers.DateTimeField(help_text="The write's: when what it says was observed.")
    storedObservedAt = serializers.DateTimeField(help_text="The stored value's, observed later: it stays.")


def skipped_json(skipped: Skipped) -> dict[str, Any]:
    """A write time order left out, as every door says it: why, and both times."""
    return {
        "reason": skipped.reason,
        "observedAt": iso_utc(skipped.observed_at),
        "storedObservedAt": iso_utc(skipped.stored_observed_at),
    }


class MemoryUpsertOutputSerializer(MemoryEntryOutputSerializer):
    """The entry an upsert left: the one written, or, when the stored value was observed after the write's
    (time order), the stored one unchanged, with ``skipped``."""

    skipped = SkippedWriteSerializer(
        required=False,
        help_text="Only when nothing was written: the stored value was observed after this write's "
        "observedAt, and stays (the entry shown is the stored one).",
    )

    class Meta(MemoryEntryOutputSerializer.Meta):
        fields = [*MemoryEntryOutputSerializer.Meta.fields, "skipped"]

    def to_representation(self, instance: UpsertResult) -> dict[str, Any]:  # type: ignore[override]  # an upsert's result, not a model instance
        data = super().to_representation(instance.entry)
        if instance.skipped is not None:
            data["skipped"] = skipped_json(instance.skipped)
        return data


class ConfidenceField(serializers.FloatField):
    """A confidence: a finite number from 0 to 1; a boolean, ``NaN`` or an infinity is refused."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(min_value=0, max_value=1, **kwargs)

    def to_internal_value(self, data: Any) -> float:
        if isinstance(data, bool):
            self.fail("invalid")
        value = super().to_internal_value(data)
        if not math.isfinite(value):
            self.fail("invalid")
        return value


def _min_confidence() -> ConfidenceField:
    return ConfidenceField(required=False, help_text="Only entries at least this sure (0 to 1).")


class MemoryUpsertInputSerializer(StrictInput):
    """One entry of a PUT."""

    returned_by = ScoredMemoryEntryOutputSerializer

    userId = StrictCharField(max_length=255)
    key = StrictCharField(max_length=MAX_KEY_CHARS, trim_whitespace=False)
    value = serializers.JSONField()
    category = StrictCharField(max_length=64, required=False, default="fact")
    visibility = serializers.ChoiceField(choices=Visibility.choices, required=False, default=Visibility.SELF)
    sourceAgentId = StrictCharField(max_length=64, required=False, allow_null=True, default=None)
    groupIds = serializers.ListField(
        child=StrictCharField(max_length=64), required=False, allow_null=True, default=None, max_length=50
    )
    sourceConversationId = StrictCharField(max_length=255, required=False, allow_null=True, default=None)
    turnId = StrictCharField(max_length=128, required=False, allow_null=True, default=None)
    validTo = serializers.DateTimeField(
        required=False, allow_null=True, default=None, help_text="The value holds until then (future)."
    )
    ttlSeconds = AsciiIntegerField(
        required=False,
        allow_null=True,
        default=None,
        min_value=1,
        max_value=MAX_TTL_SECONDS,
        help_text="Or: the value holds this many seconds from the write (validTo = now + ttlSeconds).",
    )
    confidence = ConfidenceField(
        required=False, allow_null=True, default=None, help_text="0 to 1; null: unsaid."
    )
    source = StrictCharField(  # type: ignore[assignment]  # a declared field: DRF takes it off the class
        max_length=MAX_SOURCE_CHARS,
        required=False,
        allow_null=True,
        default=None,
        help_text="user_correction, observed_pattern, task_outcome, or free text.",
    )
    observedAt = serializers.DateTimeField(
        required=False,
        allow_null=True,
        default=None,
        help_text="When what the value says was observed (default: now). A write observed before the "
        "stored value was is not written: the answer is the stored entry, with skipped.",
    )

    def to_write(self) -> MemoryWrite:
        return self.write_of(self.validated_data)

    @staticmethod
    def write_of(data: Any) -> MemoryWrite:
        """The write of a validated body (:data:`validate_upsert`'s, or ``validated_data``)."""
        return MemoryWrite(
            user_id=data["userId"],
            key=data["key"],
            value=data["value"],
            category=data["category"],
            visibility=data["visibility"],
            source_agent_id=data["sourceAgentId"],
            group_ids=data["groupIds"],
            source_conversation_id=data["sourceConversationId"],
            valid_to=data["validTo"],
            ttl_seconds=data["ttlSeconds"],
            confidence=data["confidence"],
            source=data["source"],
            observed_at=data["observedAt"],
        )


# The upsert body's validation, on the hot path of every write (memoryplatform.api.serializers.Validator).
validate_upsert = validator(MemoryUpsertInputSerializer)


class MemoryEventOutputSerializer(serializers.ModelSerializer):
    id = PublicIdField(publicids.EVENT)
    entryId = PublicIdField(publicids.ENTRY, source="entry_id", allow_null=True)
    userId = serializers.CharField(source="user_id")
    actorType = serializers.CharField(source="actor_type")
    actorId = serializers.CharField(source="actor_id")
    keyPrefix = serializers.CharField(source="key_prefix")
    oldValue = serializers.JSONField(source="old_value", allow_null=True)
    newValue = serializers.JSONField(source="new_value", allow_null=True)
    # An agent's history: true when the value was one it could not see then, and is shown as null.
    oldValueHidden = serializers.BooleanField(source="old_value_hidden", default=False, read_only=True)
    newValueHidden = serializers.BooleanField(source="new_value_hidden", default=False, read_only=True)
    createdAt = serializers.DateTimeField(source="created_at")
    observedAt = serializers.DateTimeField(
        source="observed_at",
        allow_null=True,
        help_text="A write's (created, updated): when what its new value says was observed.",
    )
    provenance = serializers.SerializerMethodField(
        help_text="Where the new value came from, when a door recorded it (extraction: source, confidence, "
        "conversation and message ids, model, prompt version, and the extraction's public id); null with a "
        "hidden new value."
    )

    class Meta:
        model = MemoryEvent
        fields = [
            "id",
            "entryId",
            "userId",
            "key",
            "action",
            "actorType",
            "actorId",
            "keyPrefix",
            "oldValue",
            "newValue",
            "oldValueHidden",
            "newValueHidden",
            "createdAt",
            "observedAt",
            "provenance",
        ]

    @extend_schema_field(OpenApiTypes.OBJECT)
    def get_provenance(self, event: MemoryEvent) -> Any:
        return None if getattr(event, "new_value_hidden", False) else provenance_shown(event.provenance)


class TtlRefreshInputSerializer(StrictInput):
    ids = serializers.ListField(
        child=serializers.CharField(max_length=20),
        max_length=MAX_TTL_REFRESH,
        help_text="Entry ids whose TTL to renew; ids the caller cannot read, or without a TTL, are skipped.",
    )
    groupIds = serializers.ListField(
        child=StrictCharField(max_length=64), required=False, allow_null=True, default=None, max_length=50
    )


class TtlRefreshOutputSerializer(serializers.Serializer):
    userId = serializers.CharField()
    refreshed = serializers.IntegerField()


class CountOutputSerializer(serializers.Serializer):
    userId = serializers.CharField()
    count = serializers.IntegerField()


class ErasedEventsSerializer(serializers.Serializer):
    eventsDeleted = serializers.IntegerField(help_text="The user's events, with their values and deliveries.")


class EraseOutputSerializer(serializers.Serializer):
    """What erasure removed: usermemory's counts, and a part per app that keeps the user's data."""

    userId = serializers.CharField()
    entriesDeleted = serializers.IntegerField()
    eventsDeleted = serializers.IntegerField(help_text="History events.")
    conflictDismissalsDeleted = serializers.IntegerField()
    events = ErasedEventsSerializer(
        help_text="The change feed's and the webhooks' part; then one `user.erased` event names the user."
    )


def _group_ids() -> serializers.ListField:
    return serializers.ListField(
        child=serializers.CharField(max_length=64),
        required=False,
        help_text="Group context (repeatable): the groups the caller reads for.",
    )


def _include_superseded() -> serializers.BooleanField:
    return serializers.BooleanField(
        required=False,
        default=False,
        help_text="Also entries no longer valid: superseded by a Dream summary, or past their validTo.",
    )


def _as_of() -> serializers.DateTimeField:
    return serializers.DateTimeField(
        required=False,
        help_text="An ISO 8601 time in the past: the entries as history knew them then (read-only).",
    )


def _min_score() -> ConfidenceField:
    return ConfidenceField(
        required=False,
        help_text="Only results at least this relevant: the score is the probability of relevance (0 to 1), "
        "the same scale for every query.",
    )


def _categories() -> serializers.ListField:
    return serializers.ListField(
        child=serializers.CharField(max_length=64),
        required=False,
        max_length=50,
        help_text="Only entries of these categories (repeatable: any of them).",
    )


MATCH_FIELDS = frozenset({"keyPrefix", "visibility", "filter"})


class MatchQuerySerializer(StrictInput):
    """A list's, a search's and a ranked recall's narrowing: a key prefix, one visibility, conditions on the
    value's fields (``to_filters``)."""

    keyPrefix = StrictCharField(
        required=False, max_length=MAX_KEY_CHARS, trim_whitespace=False, help_text="Only keys starting so."
    )
    visibility = serializers.ChoiceField(choices=Visibility.choices, required=False)
    filter = serializers.JSONField(
        required=False,
        binary=True,
        help_text='JSON: {"field": value} or {"field": {"$gt": value}} ($eq $ne $gt $gte $lt $lte) on the '
        "value's fields; every condition holds.",
    )


class RankedFiltersSerializer(MatchQuerySerializer):
    """The filters of every ranked read, applied in the same statement as visibility (``to_filters``)."""

    category = _categories()
    source = StrictCharField(  # type: ignore[assignment]  # a declared field: DRF takes it off the class
        required=False, max_length=MAX_SOURCE_CHARS, help_text="Only entries of this source."
    )
    updatedAfter = serializers.DateTimeField(
        required=False, help_text="Only entries updated after this time."
    )
    minScore = _min_score()


RANKED_FILTERS = ("category", "source", "updatedAfter", "keyPrefix", "visibility", "filter", "minScore")


def to_filters(attrs: dict[str, Any], *, author: str | None = None) -> Filters:
    """The :class:`usermemory.sql.search.Filters` of a validated ranked read; ``author`` whose entries."""
    return Filters(
        categories=attrs.get("category") or None,
        source=attrs.get("source"),
        author=author,
        updated_after=attrs.get("updatedAfter"),
        key_prefix=attrs.get("keyPrefix") or None,
        visibility=attrs.get("visibility"),
        conditions=value_conditions(attrs.get("filter")),
    )


class GroupQuerySerializer(StrictInput):
    groupId = _group_ids()
    includeSuperseded = _include_superseded()


class RecallQuerySerializer(StrictInput):
    """``q`` of a recall (``/visible``, a conversation's ``/context``): recall by relevance to it. Given
    empty (``?q=``), it is refused rather than read as absent, as DRF reads an optional blank field."""

    q = serializers.CharField(
        required=False,
        max_length=MAX_QUERY_CHARS,
        trim_whitespace=False,
        help_text="Recall by relevance to this text (hybrid by default), best first, each entry with a "
        "score; X-Search-Fallback: fulltext when the embedder is down. Without it: the recall order.",
    )

    def to_internal_value(self, data: Any) -> Any:
        attrs = super().to_internal_value(data)
        # the raw query string: DRF reads an optional field given blank as absent (validated by a Validator,
        # this serializer keeps nothing of a validation, so the check is here, not on ``initial_data``)
        if "q" not in attrs and isinstance(data, Mapping) and "q" in data:
            raise serializers.ValidationError({"q": "q must not be empty (leave it out to recall in order)."})
        return attrs

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        ranked_only = [name for name in (*RANKED_FILTERS, "sourceAgentId") if name in attrs]
        if ranked_only and "q" not in attrs:
            name = ranked_only[0]
            raise serializers.ValidationError({name: f"{name} narrows a recall by relevance: give q too."})
        return attrs


class VisibleQuerySerializer(RecallQuerySerializer, RankedFiltersSerializer):
    sourceAgentId = StrictCharField(
        required=False, max_length=64, help_text="With q: only the entries this agent wrote."
    )
    agentId = serializers.CharField(
        required=False, max_length=64, help_text="Required with viewer and admin keys: the agent recalling."
    )
    groupId = _group_ids()
    order = serializers.ChoiceField(
        choices=RecallOrder.choices,
        required=False,
        help_text="Default: the agent's recallOrder. With q it orders nothing; most_accessed still counts "
        "each returned entry's access.",
    )
    limit = AsciiIntegerField(
        required=False, min_value=1, max_value=1000, help_text="At most the agent's maxRecallEntries."
    )
    mode = serializers.ChoiceField(
        choices=RANKED_MODES,
        required=False,
        help_text="With q: hybrid (meaning and words, the default) or semantic (meaning only).",
    )
    asOf = _as_of()
    minConfidence = _min_confidence()

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        attrs = super().validate(attrs)
        if "mode" in attrs and "q" not in attrs:
            raise serializers.ValidationError({"mode": "mode ranks by relevance to q: give q too."})
        if "asOf" in attrs and "q" in attrs:
            raise serializers.ValidationError({"asOf": "asOf answers from history, in order: leave q out."})
        return attrs


class ListQuerySerializer(StrictInput):
    groupId = _group_ids()
    limit = AsciiIntegerField(
        required=False, min_value=1, max_value=1000, default=1000, help_text="At most this many."
    )
    offset = AsciiIntegerField(required=False, min_value=0, max_value=MAX_OFFSET, default=0)
    includeSuperseded = _include_superseded()


class UserListQuerySerializer(ListQuerySerializer, MatchQuerySerializer):
    """A user's list: ``asOf`` reads it as history knew it then; ``agentId`` only what that agent wrote (that
    the caller may see); ``minConfidence`` only entries at least that sure."""

    asOf = _as_of()
    agentId = StrictCharField(
        required=False,
        max_length=64,
        help_text="Only the entries this agent wrote (that the caller may see).",
    )
    minConfidence = _min_confidence()
    keyPattern = serializers.ListField(
        child=StrictCharField(max_length=MAX_KEY_CHARS, trim_whitespace=False),
        required=False,
        max_length=32,
        help_text="Only keys matching a pattern (repeatable: any of them): the key's '/'-separated segments, "
        "'*' any one segment, '**' any number of them (none too), the whole key: '*/prefs/*', 'memories/**', "
        "'**/prefs/*' (LangGraph's namespace wildcards).",
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if "asOf" in attrs and attrs.get("includeSuperseded"):
            raise serializers.ValidationError(
                {"asOf": "asOf answers with what was valid then: leave includeSuperseded out."}
            )
        if "asOf" in attrs and (
            attrs.get("agentId")
            or attrs.get("minConfidence") is not None
            or (MATCH_FIELDS | {"keyPattern"}) & set(attrs)
        ):
            leave = "agentId, minConfidence, keyPrefix, keyPattern, visibility and filter"
            raise serializers.ValidationError({"asOf": f"asOf answers from history: leave {leave} out."})
        return attrs


class SearchQuerySerializer(ListQuerySerializer, RankedFiltersSerializer):
    q = serializers.CharField(
        max_length=MAX_QUERY_CHARS,
        trim_whitespace=False,
        help_text="keyword: matched literally; else by relevance.",
    )
    agentId = StrictCharField(
        required=False,
        max_length=64,
        help_text="Only the entries this agent wrote (that the caller may see).",
    )
    mode = serializers.ChoiceField(
        choices=SEARCH_MODES,
        required=False,
        default="keyword",
        help_text="keyword (EDDI's literal match, newest first: the default, for EDDI clients), semantic (by "
        "meaning) or hybrid (meaning and words; what a newcomer wants).",
    )
    minConfidence = _min_confidence()

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs.get("mode") == "keyword" and "minScore" in attrs:
            raise serializers.ValidationError({"minScore": "keyword search does not score: use mode hybrid."})
        return attrs


class SearchAllQuerySerializer(ListQuerySerializer):
    """Staff search across every user: full text only, of the entries valid now, in no group context."""

    groupId = None  # type: ignore[assignment]  # DRF drops an inherited field set to None: staff search has no group
    includeSuperseded = None  # type: ignore[assignment]  # staff search reads the entries valid now
    q = serializers.CharField(max_length=MAX_QUERY_CHARS, trim_whitespace=False, help_text="Words to find.")
    category = serializers.CharField(required=False, max_length=64)
