"""Serializer helpers shared by the apps' REST doors."""

import re
import threading
from typing import Any

from rest_framework import serializers
from rest_framework.utils.serializer_helpers import BindingDict

from memoryplatform import publicids
from memoryplatform.api.errors import first_message
from memoryplatform.errors import BadRequest


class FieldsBuiltOnce(serializers.Serializer):
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
        else:
            fields.serializer = self
            for field in fields.values():
                field.parent = self
        return fields

    def create(self, validated_data: Any) -> Any:  # input only: the services write
        raise NotImplementedError

    def update(self, instance: Any, validated_data: Any) -> Any:
        raise NotImplementedError


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
