"""The LangGraph store's namespaces as the list's key patterns (``keyPattern``): which keys an entry of a
namespace that meets ``list_namespaces``' match conditions may have, so that the server narrows by them
(issue 47). Pure functions; :mod:`memoryplatform_client.langgraph` checks each namespace exactly after."""

from __future__ import annotations

from collections.abc import Sequence

SEP = "/"
WILDCARD = "*"  # in list_namespaces' conditions (LangGraph's MatchCondition), any one element
MAX_PATTERNS = 32  # the list's keyPattern: at most this many (beyond, the store asks for every entry)
SCOPES = ("global", "group")


def _pattern(segments: Sequence[str]) -> str:
    """A key pattern (the list's ``keyPattern``): labels escaped, ``*`` and ``**`` kept."""
    return SEP.join(part if part in (WILDCARD, "**") else escape_label(part) for part in segments)


def _unify(left: Sequence[str], right: Sequence[str]) -> list[str] | None:
    """The labels both sequences of one length match (a ``*`` matches any one), or ``None``."""
    both = []
    for a, b in zip(left, right, strict=True):
        if WILDCARD not in (a, b) and a != b:
            return None
        both.append(b if a == WILDCARD else a)
    return both


def _readings(path: Sequence[str]) -> list[tuple[tuple[str, ...], bool]]:
    """The labels a condition's path (the user taken out) may end or start with:
    ``(labels, exact)``. All of it (more labels may follow it in a prefix, precede it in a suffix); and,
    where its last elements may be a scope rather than labels, the labels before them, the whole labels
    (``exact``) of a prefix: ``global`` (or ``*``) is one element, ``("group", id)`` two, ``group`` alone
    ends a prefix of any group."""
    found = [(tuple(path), False)]
    if path[-1:] and path[-1] in (WILDCARD, *SCOPES):
        found.append((tuple(path[:-1]), True))
    if len(path) >= 2 and path[-2] in (WILDCARD, "group"):
        found.append((tuple(path[:-2]), True))
    return found


def key_patterns(prefix: Sequence[str], suffix: Sequence[str] | None) -> list[str] | None:
    """The key patterns (any of them) of every entry whose namespace meets the conditions: ``prefix`` and
    ``suffix`` without the user (a suffix from after its last element that may be the
    user); the store checks each namespace exactly after. ``None``: too many to ask for."""
    patterns: list[str] = []
    for start, exact in _readings(prefix):
        for end, _ in _readings(suffix) if suffix else [((), False)]:
            if exact:  # the labels are start: they end with end
                both = _unify(start[len(start) - len(end) :], end) if len(end) <= len(start) else None
                if both is not None:
                    patterns.append(_pattern([*start[: len(start) - len(end)], *both, WILDCARD]))
                continue
            patterns.append(_pattern([*start, "**", *end, WILDCARD]))
            for overlap in range(1, min(len(start), len(end)) + 1):  # labels shorter than both together
                both = _unify(start[len(start) - overlap :], end[:overlap])
                if both is not None:
                    patterns.append(
                        _pattern([*start[: len(start) - overlap], *both, *end[overlap:], WILDCARD])
                    )
    unique = list(dict.fromkeys(patterns))
    return unique if len(unique) <= MAX_PATTERNS else None


def escape_label(part: str) -> str:
    """A label as a key segment: ``%`` and ``/`` escaped."""
    return part.replace("%", "%25").replace(SEP, "%2F")


def unescape_label(part: str) -> str:
    return part.replace("%2F", SEP).replace("%25", "%")
