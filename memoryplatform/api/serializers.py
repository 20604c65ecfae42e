"""Serializer helpers shared by the apps' REST doors."""

import difflib
import re
import threading
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, ClassVar

from django.http import QueryDict
from rest_framework import serializers
from rest_framework.exceptions import ErrorDetail
from rest_framework.settings import api_settings

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


class Validator:
    """Validates the bodies (or query strings) of one input serializer with one instance of it per thread,
    through DRF's public ``run_validation``: the validated data, or DRF's ``ValidationError`` whose
    ``detail`` is what ``serializer.errors`` would be. ``is_valid`` runs the same ``run_validation``; a
    ``ListSerializer`` validates each item the same way, with its one child.

    The hot path's reason: DRF deep-copies every declared field for each serializer instance, about 0.3 ms of
    CPU for the upsert body, four times its validation (``bench/serializer_fields.py``, ``bench/RESULTS.md``).
    So a serializer validated here keeps no state of a validation on itself: its ``validate`` reads only
    ``attrs``, and a check of the raw input goes in ``to_internal_value`` (which receives it), never
    ``initial_data``. A thread's instance is never shared with another thread."""

    def __init__(self, serializer_class: type[serializers.Serializer]) -> None:
        self.serializer_class = serializer_class
        self._local = threading.local()

    def __call__(self, data: Any) -> dict[str, Any]:
        serializer = getattr(self._local, "serializer", None)
        if serializer is None:
            serializer = self._local.serializer = self.serializer_class()
        try:
            return dict(serializer.run_validation(data))
        except serializers.ValidationError as exc:
            raise serializers.ValidationError(_as_errors(exc.detail)) from None


def _as_errors(detail: Any) -> Any:
    """A serializer's error detail as ``serializer.errors`` gives it after ``is_valid``: a list (the body
    itself is wrong) under ``non_field_errors``, and no body at all (``null``) as "No data provided"."""
    if not isinstance(detail, list):
        return detail
    if len(detail) == 1 and getattr(detail[0], "code", None) == "null":
        detail = [ErrorDetail("No data provided", code="null")]
    return {api_settings.NON_FIELD_ERRORS_KEY: detail}


_VALIDATORS: dict[type[serializers.Serializer], Validator] = {}


def validator(serializer_class: type[serializers.Serializer]) -> Validator:
    """The one :class:`Validator` of a serializer class."""
    found = _VALIDATORS.get(serializer_class)
    if found is None:
        found = _VALIDATORS.setdefault(serializer_class, Validator(serializer_class))
    return found


def validated_item(validate: Validator, data: Any, *, items: str, index: int) -> dict[str, Any]:
    """Validate one item of a batch body: a refusal names its place (``entries[3]: ...``) and carries DRF's
    errors as ``details.fields``."""
    try:
        return validate(data)
    except serializers.ValidationError as exc:
        raise BadRequest(
            f"{items}[{index}]: {first_message(exc.detail)}", details={"index": index, "fields": exc.detail}
        ) from None


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
