"""Public ids: what every door shows of an entry's, a task's, a tool call's, a history event's or an
extraction's id.

Each of these tables numbers its rows with one global sequence. Shown as is, an id tells a writer how many
rows every other caller wrote since its last write, for users and scopes it cannot see (issue 33, finding 8).
So no door shows it: each shows a keyed permutation of it instead.

- ``public = PUBLIC_BASE + feistel(kind key, internal)``. The Feistel network (:data:`ROUNDS` rounds over two
  26-bit halves, round function a keyed BLAKE2b) maps ``[0, 2**52)`` one to one onto itself. The public id is
  an integer in ``[2**52, 2**53)``, which a JavaScript number holds exactly, never equal to an internal id.
  Without the key, two public ids say nothing of the distance between their rows; with it, decoding is as
  cheap as encoding. The rows, their primary keys and their indexes do not change.
- Each :data:`Kind` has its own key, derived from :data:`settings.PUBLIC_ID_KEY` (unset: from ``SECRET_KEY``,
  through HMAC with a label), so the same internal number gives unrelated ids of an entry and of a task.
  Changing the key changes every public id: pin ``PUBLIC_ID_KEY`` before production (a deploy check says so).
- Input: a public id is decoded. A whole number below ``PUBLIC_BASE`` is a *legacy* id, the internal id that
  doors showed before, taken as is while ``PUBLIC_IDS_ACCEPT_LEGACY`` is on (deprecated: a caller that holds a
  legacy id can probe the ids next to it). Anything else (negative, ``2**53`` or more, not ASCII digits) is no
  id: the door answers as for an unknown one. The visibility rules then apply to the row as to any id.

Why a permutation and not UUIDv7: no new column, no second unique index on tables of millions of rows, and the
JSON type of ``id`` stays what clients hold. The cost: about 3 us per id (four BLAKE2b rounds), 0.3 ms of a
100-entry recall; a shared machine's request took 6-16 ms (figures in the issue's report).

The doors use :class:`memoryplatform.api.serializers.PublicIdField`, the ``<entry:...>``/``<task:...>`` path
kinds of :mod:`memoryplatform.routing`, or :func:`to_public`/:func:`parse` (LLM and MCP tools, the export).
"""

import hashlib
import hmac
from functools import lru_cache
from typing import Literal

from django.conf import settings

PUBLIC_BASE = 2**52
"""Public ids lie in ``[PUBLIC_BASE, 2 * PUBLIC_BASE)``; below it, an id is a legacy (internal) one."""
ROUNDS = 4  # Luby-Rackoff: 4 rounds of a pseudorandom function make a strong pseudorandom permutation
HALF_BITS = 26
HALF_MASK = (1 << HALF_BITS) - 1


Kind = Literal["entry", "task", "tool_call", "event", "extraction", "change"]
"""What a public id names. Plain strings, not an Enum: an Enum member hashes in Python code, about 0.5 us of
each id's 3 us."""
ENTRY: Kind = "entry"
TASK: Kind = "task"
TOOL_CALL: Kind = "tool_call"
EVENT: Kind = "event"
EXTRACTION: Kind = "extraction"  # named in a history event's provenance (issue 44, finding 10)
CHANGE: Kind = "change"  # an event of the change feed and the webhooks (events.Event), not a history event


def master_key() -> bytes:
    """``PUBLIC_ID_KEY``, or, unset, a key derived from ``SECRET_KEY`` (never the same bytes as it)."""
    return _master(settings.PUBLIC_ID_KEY, settings.SECRET_KEY)


@lru_cache(maxsize=4)
def _master(public_id_key: str, secret_key: str) -> bytes:
    if public_id_key:
        return public_id_key.encode()
    return hmac.new(secret_key.encode(), b"memoryplatform.publicids.v1", hashlib.sha256).digest()


def _rounds(kind: Kind) -> tuple[hashlib.blake2b, ...]:
    # The settings' strings, not the derived key, key the cache: a str caches its hash, bytes do too, but
    # deriving the key is an HMAC per call (about 1 us of the 3).
    return _round_keys(kind, settings.PUBLIC_ID_KEY, settings.SECRET_KEY)


@lru_cache(maxsize=16)
def _round_keys(kind: Kind, public_id_key: str, secret_key: str) -> tuple[hashlib.blake2b, ...]:
    """One keyed BLAKE2b per round, ready to copy: ``copy()`` of a keyed state skips the key's block."""
    master = _master(public_id_key, secret_key)
    kind_key = hmac.new(master, f"kind:{kind}".encode(), hashlib.sha256).digest()
    return tuple(
        hashlib.blake2b(key=kind_key, digest_size=8, person=b"mp-ids-round" + bytes([r]))
        for r in range(ROUNDS)
    )


def _round(state: hashlib.blake2b, half: int) -> int:
    h = state.copy()
    h.update(half.to_bytes(4, "little"))
    return int.from_bytes(h.digest(), "little") & HALF_MASK


def _encrypt(rounds: tuple[hashlib.blake2b, ...], value: int) -> int:
    left, right = value >> HALF_BITS, value & HALF_MASK
    for state in rounds:
        left, right = right, left ^ _round(state, right)
    return (left << HALF_BITS) | right


def _decrypt(rounds: tuple[hashlib.blake2b, ...], value: int) -> int:
    left, right = value >> HALF_BITS, value & HALF_MASK
    for state in reversed(rounds):
        left, right = right ^ _round(state, left), left
    return (left << HALF_BITS) | right


def to_public(kind: Kind, internal: int) -> int:
    """The public id of the row ``internal`` of ``kind``. ``internal`` is a primary key: ``0 <= internal <
    2**52`` (a bigint sequence reaches that after 4.5e15 rows)."""
    if not 0 <= internal < PUBLIC_BASE:
        raise ValueError(f"internal id out of range: {internal}")
    return _public(kind, internal, settings.PUBLIC_ID_KEY, settings.SECRET_KEY)


@lru_cache(maxsize=16384)
def _public(kind: Kind, internal: int, public_id_key: str, secret_key: str) -> int:
    """The ids rendered lately, kept: a recall or a list renders the same entries again and again, and an id
    costs four BLAKE2b rounds (10 % of a 40-entry recall's CPU, ``bench/RESULTS.md`` session 12). Keyed by
    the settings' strings, like :func:`_round_keys`, so a changed key never answers from the cache; about
    3 MB at most."""
    return PUBLIC_BASE + _encrypt(_round_keys(kind, public_id_key, secret_key), internal)


def public_str(kind: Kind, internal: int | None) -> str | None:
    """:func:`to_public` as the REST outputs write it (a string, as ``id`` always was), ``None`` kept."""
    return None if internal is None else str(to_public(kind, internal))


def to_internal(kind: Kind, public: int) -> int | None:
    """The internal id that ``public`` names: a public id decoded, a legacy id as is (when accepted), else
    ``None`` (no id of any row)."""
    if PUBLIC_BASE <= public < 2 * PUBLIC_BASE:
        return _decrypt(_rounds(kind), public - PUBLIC_BASE)
    if 0 <= public < PUBLIC_BASE and settings.PUBLIC_IDS_ACCEPT_LEGACY:
        return public
    return None


def parse(kind: Kind, given: object) -> int | None:
    """An id as a door received it (a JSON integer, or a string of ASCII digits) as the internal id it names,
    or ``None`` when it names none (the door answers as for an unknown id)."""
    if isinstance(given, bool):
        return None
    if isinstance(given, int):
        return to_internal(kind, given)
    if isinstance(given, str) and given.isascii() and given.isdigit() and len(given) <= 16:
        return to_internal(kind, int(given))
    return None
