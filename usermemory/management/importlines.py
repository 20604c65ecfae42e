"""What a line of an import file means: JSON Lines, one memory a line, in one of two formats.

**``eddi``** (the default): a line is the body of ``PUT /usermemorystore/memories``, checked by the same
serializer as that door, so its field names, types and defaults are the REST API's: ``userId``, ``key`` and
``value`` (any JSON but ``null``) are required; ``category`` (default ``fact``), ``visibility`` (default
``self``), ``sourceAgentId`` (the agent that writes it; left out: ``--agent``), ``groupIds``,
``sourceConversationId``, ``validTo``, ``ttlSeconds``, ``confidence`` and ``source`` are optional. The fields
a read returns (``id``, ``createdAt``, ``accessCount``, ...) are accepted and ignored, so what the API listed
can be imported again; ``turnId`` is ignored (an import counts its own turns); any other field is an error.

**``mem0``**: a line is one memory as mem0's ``get_all`` and ``get`` return it (mem0's ``MemoryItem``: ``id``
and ``memory`` required, with ``user_id``, ``agent_id``, ``hash``, ``metadata``, ``categories``,
``created_at``, ``updated_at``; other fields are ignored), e.g. the elements of ``get_all``'s ``results``, one
a line (``jq -c '.results[]'``). mem0 documents no file format of its own: its "memory export" is a structured
extraction into a schema the caller supplies, so that is not read. Each record becomes:

- ``userId`` = ``user_id`` (required here: an entry belongs to a user);
- ``key`` = ``mem0:<id>``: mem0 has no keys, and the id is stable, so a second import of the same export
  finds the same entries;
- ``value`` = ``memory`` (a string), ``category`` = ``fact``, ``source`` = ``mem0``;
- with ``agent_id``: written by that agent, ``self`` (mem0 scoped it to the agent); without: ``global`` (a
  fact about the user, which mem0 shows every agent), written by ``--agent``;
- ``id``, ``hash``, ``categories``, ``metadata``, ``created_at`` and ``updated_at`` go to the history event's
  provenance, not to the entry (the entry's own times are the import's), but for ``observedAt``: mem0's
  ``updated_at``, else its ``created_at``, when it is an ISO 8601 time with a zone (time order: a record
  older than the stored value does not replace it).

**Malformed** (the import stops, :class:`usermemory.importing.MalformedLine`): not UTF-8, not JSON (a key
twice in one object, ``NaN``, too deep), not an object, a required field missing or ``null``, a field of the
wrong type, an unknown field. **Refused** (reported, the import goes on): a value the rules refuse, here
(over a field's size, not one of the choices, out of range, blank) or in the service. Blank lines are
skipped.
"""

from collections.abc import Iterable, Iterator
from typing import Any

from django.utils.dateparse import parse_datetime
from rest_framework.exceptions import ErrorDetail, ValidationError

from memoryplatform.text import json_loads, json_problem
from usermemory.api.serializers import MemoryUpsertInputSerializer, validate_upsert
from usermemory.importing import ImportLine, MalformedLine, Refusal

FORMATS = ("eddi", "mem0")
MEM0_KEY_PREFIX = "mem0:"
MEM0_SOURCE = "mem0"
MEM0_PROVENANCE_FIELDS = ("id", "hash", "categories", "metadata", "created_at", "updated_at")

# DRF's error codes for a value of the right type that a rule refuses; any other code (required, null,
# invalid, not_a_list, date, ...) is a line of the wrong shape.
_REFUSED_CODES = frozenset(
    {
        "blank",
        "max_length",
        "min_length",
        "invalid_choice",
        "max_value",
        "min_value",
        "max_string_length",
        "null_characters_not_allowed",
        "surrogate_characters_not_allowed",
    }
)


def _first_error(detail: Any, path: str = "") -> tuple[str, ErrorDetail | str]:
    """The first error of a DRF error detail, with the field it is about (``groupIds.0``)."""
    if isinstance(detail, dict):
        name, value = next(iter(detail.items()))
        field = "" if name == "non_field_errors" else str(name)
        return _first_error(value, f"{path}.{field}" if path and field else path or field)
    if isinstance(detail, list) and detail:
        return _first_error(detail[0], path)
    return path, detail


def _checked(number: int, body: dict[str, Any], *, provenance: dict[str, Any]) -> ImportLine | Refusal:
    """A line's body through the REST door's serializer: its write, its refusal, or :class:`MalformedLine`."""
    try:
        valid = validate_upsert(body)
    except ValidationError as exc:
        field, error = _first_error(exc.detail)
        message = f"{field}: {error}" if field else str(error)
        if getattr(error, "code", None) in _REFUSED_CODES:
            return Refusal(number, "bad_request", message)
        raise MalformedLine(number, message) from None
    return ImportLine(
        number=number,
        write=MemoryUpsertInputSerializer.write_of(valid),
        agent=valid["sourceAgentId"],
        provenance=provenance,
    )


def _eddi(number: int, record: dict[str, Any]) -> ImportLine | Refusal:
    return _checked(number, record, provenance={"source": "import", "format": "eddi", "line": number})


def _mem0(number: int, record: dict[str, Any]) -> ImportLine | Refusal:
    for name in ("id", "memory", "user_id"):
        if not isinstance(record.get(name), str):
            raise MalformedLine(number, f"{name}: a mem0 memory's {name} is required, a string.")
    agent = record.get("agent_id")
    if agent is not None and not isinstance(agent, str):
        raise MalformedLine(number, "agent_id: a string or null.")
    given = {name: record[name] for name in MEM0_PROVENANCE_FIELDS if record.get(name) is not None}
    provenance = {"source": "import", "format": "mem0", "line": number, "mem0": given}
    problem = json_problem(given)
    if problem:
        return Refusal(number, "bad_request", f"the mem0 record's fields: {problem}.")
    body: dict[str, Any] = {
        "userId": record["user_id"],
        "key": f"{MEM0_KEY_PREFIX}{record['id']}",
        "value": record["memory"],
        "category": "fact",
        "visibility": "self" if agent else "global",
        "sourceAgentId": agent or None,
        "source": MEM0_SOURCE,
    }
    observed = _mem0_time(record.get("updated_at")) or _mem0_time(record.get("created_at"))
    if observed is not None:
        body["observedAt"] = observed
    return _checked(number, body, provenance=provenance)


def _mem0_time(value: Any) -> str | None:
    """A mem0 time as the upsert's ``observedAt`` takes it: an ISO 8601 time with a zone, else ``None`` (a
    naive time's zone is unknown)."""
    if not isinstance(value, str):
        return None
    try:
        parsed = parse_datetime(value)
    except ValueError:
        return None
    return value if parsed is not None and parsed.tzinfo is not None else None


_READERS = {"eddi": _eddi, "mem0": _mem0}


def _record(number: int, raw: bytes) -> dict[str, Any] | None:
    """The line's JSON object; ``None`` for a blank line."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MalformedLine(number, f"not UTF-8 ({exc.reason} at byte {exc.start}).") from None
    if number == 1:
        text = text.removeprefix("\ufeff")  # a byte order mark
    if not text.strip():
        return None
    try:
        record = json_loads(text)
    except RecursionError:
        raise MalformedLine(number, "not JSON: nested too deeply.") from None
    except ValueError as exc:  # also DuplicateKey
        raise MalformedLine(number, f"not JSON ({exc}).") from None
    if not isinstance(record, dict):
        raise MalformedLine(number, f"not a JSON object (a {type(record).__name__}).")
    return record


def read_lines(raw_lines: Iterable[bytes], *, fmt: str = "eddi") -> Iterator[ImportLine | Refusal]:
    """The lines of a JSON Lines file (bytes, as a binary file gives them), numbered from 1, as the import
    takes them; raises :class:`MalformedLine` at the first line of the wrong shape."""
    reader = _READERS[fmt]
    for number, raw in enumerate(raw_lines, start=1):
        record = _record(number, raw)
        if record is not None:
            yield reader(number, record)
