"""Serializer helpers shared by the apps' REST doors."""

import difflib
import re
import threading
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, ClassVar

from django.http import QueryDict
from rest_framework import serializers
from rest_framework.utils.serializer_helpers import BindingDict

from memoryplatform import publicids
from memoryplatform.api.errors import first_message
from memoryplatform.errors import BadRequest


class StrictInput(serializers.Serializer):
    """A request body's serializer: a field it does not know is refused, a 400 naming it (``visibilty:
    unknown field; did you mean visibility?``), so a typo is never stored as the default. Nested bodies
    (a policy's ``guardrails``, a batch's messages) are checked the same way, each by its own serializer.

    ``returned_by`` names the output serializer of the resource this body writes: the fields the API returns
    there and this body does not take (``id``, ``createdAt``, ...) are accepted and ignored, so a client that
    sends back what it read still works. They are listed in the schema's description of the body. Query
    strings (a ``QueryDict``) are checked before the view, against the parameters the operation documents
    (:mod:`memoryplatform.api.querystrings`), so a query serializer does not check them again.
    """

    returned_by: ClassVar[type[serializers.Serializer] | None] = None
    hints: ClassVar[Mapping[str, str]] = {}  # a likely wrong name -> the field meant, for the message

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        ignored = returned_fields_ignored(cls)
        if ignored:
            note = (
                f"Fields the API returns here and a write does not take ({', '.join(ignored)}) are accepted "
                "and ignored, so what a read returned can be sent back; any other unknown field is a 400."
            )
            cls.__doc__ = f"{(cls.__doc__ or '').rstrip()}\n\n{note}".lstrip()

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, Mapping) and not isinstance(data, QueryDict):
            # Its own read-only fields are known too: DRF ignores them on input.
            accepted = [*self.fields, *returned_fields_ignored(type(self))]
            refuse_unknown_fields(data, accepted=accepted, hints=self.hints)
        return super().to_internal_value(data)


_IGNORED: dict[type, tuple[str, ...]] = {}


def returned_fields_ignored(cls: type[StrictInput]) -> tuple[str, ...]:
    """The fields ``cls.returned_by`` writes that ``cls`` does not take: accepted on input, and ignored."""
    if cls.returned_by is None:
        return ()
    ignored = _IGNORED.get(cls)
    if ignored is None:
        own = set(cls().get_fields())
        ignored = _IGNORED[cls] = tuple(name for name in cls.returned_by().get_fields() if name not in own)
    return ignored


def refuse_unknown_fields(
    data: Mapping[Any, Any], *, accepted: Iterable[str], hints: Mapping[str, str] | None = None
) -> None:
    """A 400 (``ValidationError``) naming each field of ``data`` not in ``accepted``, with the likely one
    meant when a name is close to an accepted one (or is in ``hints``)."""
    errors = unknown_names(data, accepted=accepted, hints=hints)
    if errors:
        raise serializers.ValidationError(errors)


def unknown_names(
    names: Iterable[Any],
    *,
    accepted: Iterable[str],
    hints: Mapping[str, str] | None = None,
    what: str = "field",
) -> dict[str, list[str]]:
    """Each name not in ``accepted``, with its message: ``unknown <what>; did you mean <name>?`` when a name
    is close to an accepted one (or is in ``hints``), else ``unknown <what>.``. Empty when all are known."""
    known = set(accepted)
    errors = {}
    for name in map(str, names):
        if name in known:
            continue
        close = difflib.get_close_matches(name, sorted(known), n=1)
        meant = (hints or {}).get(name) or (close[0] if close else None)
        errors[name] = [f"unknown {what}; did you mean {meant}?" if meant else f"unknown {what}."]
    return errors


class FieldsBuiltOnce(StrictInput):
    """An input serializer whose declared fields are built once per thread, not once per instance.

    DRF deep-copies every declared field (and so re-runs each field's ``__init__`` and its validators) for
    each serializer instance: about 150 us for a ten-field entry, more than validating it (profile in
    ``bench/RESULTS.md``). Fields hold no per-request state, only their configuration and ``parent``, so an
    instance re-points the thread's copy at itself. For input serializers only: the fields must not read the
    serializer's context, and one instance must be done with before the thread makes the next of its class.
    """

    _built = threading.local()

    @property
    def fields(self) -> BindingDict:
        cache: dict[type, BindingDict] = self._built.__dict__.setdefault("by_class", {})
        fields = cache.get(type(self))
        if fields is None:
            fields = BindingDict(self)
            for name, field in self.get_fields().items():
                fields[name] = field
            cache[type(self)] = fields
        elif fields.serializer is not self:  # DRF reads ``fields`` several times a validation: re-point once
            fields.serializer = self
            for field in fields.values():
                field.parent = self
        return fields

    def create(self, validated_data: Any) -> Any:  # input only: the services write
        raise NotImplementedError

    def update(self, instance: Any, validated_data: Any) -> Any:
        raise NotImplementedError


class StrictCharField(serializers.CharField):
    """A string field that refuses numbers and booleans instead of turning them into text."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class AsciiIntegerField(serializers.IntegerField):
    """An integer field that takes ASCII digits only.

    DRF's ``IntegerField`` goes through Python's ``int()``, which also reads ``"١"`` (an Arabic-Indic one) or
    ``" 5 "`` as numbers. Give it ``min_value`` and ``max_value``: an unbounded integer reaches the database
    as an out-of-range error.
    """

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or (isinstance(data, str) and not _ASCII_INTEGER.fullmatch(data)):
            self.fail("invalid")
        return super().to_internal_value(data)


_ASCII_INTEGER = re.compile(r"-?[0-9]+")


class PublicIdField(serializers.CharField):
    """The id of an entry, task, tool call or history event as every REST output writes it: its public id
    (:mod:`memoryplatform.publicids`), a string of digits, never the row's own number. Output only."""

    def __init__(self, kind: publicids.Kind, **kwargs: Any) -> None:
        self.kind = kind
        kwargs.setdefault("read_only", True)
        kwargs.setdefault("help_text", f"The {kind.replace('_', ' ')}'s public id: opaque digits.")
        super().__init__(**kwargs)

    def to_representation(self, value: Any) -> str:  # the row's id, an int (CharField's stubs say str)
        return str(publicids.to_public(self.kind, value))


def require_valid_item(data: serializers.Serializer, *, items: str, index: int) -> None:
    """Validate one item of a batch body: a refusal names its place (``entries[3]: ...``) and carries DRF's
    errors as ``details.fields``."""
    if not data.is_valid():
        raise BadRequest(
            f"{items}[{index}]: {first_message(data.errors)}",
            details={"index": index, "fields": data.errors},
        )


def iso_utc(value: datetime | None) -> str | None:
    """DRF's DateTimeField output: ISO 8601 in UTC with a 'Z'."""
    if value is None:
        return None
    if value.tzinfo is None:  # as timezone.localtime refuses one; the database gives aware datetimes
        raise ValueError("a naive datetime has no place in an answer")
    # datetime's own conversion: Django's localtime() checks and converts the same, at 2-3 times the cost,
    # five times an entry (profile in bench/RESULTS.md, session 12). A value already at UTC's offset (the
    # database's: Django sets the session's time zone to UTC) is written as it is, without converting it.
    text = value.isoformat()
    if not text.endswith("+00:00"):
        text = value.astimezone(UTC).isoformat()
    return text[:-6] + "Z"
