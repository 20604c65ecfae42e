"""What a key says about its value, for Dream's contradictions by meaning and extraction's match of a fact's
key to a stored one by meaning (issue 46).

Keys are compared by meaning only where they carry one. An agent's framework may name items by number or id
(LangGraph's ``1`` and ``2``, or ``memories/1`` under a namespace; a uuid; ``m-7f3a``): two such keys are as
close to each other as ``city`` is to ``home_town`` by the embedder, though they name unrelated facts ("I
love pizza", "I am a plumber"). Such a key is opaque: :func:`key_carries_meaning` is false, and it takes part
in no meaning set. Its value is not compared with others' instead (that would need telling which values
describe the same attribute, and the values are free text): a set is a conflict between two keys, and an
opaque key gives Dream nothing to stand on. A (user, key) set of one opaque key still conflicts when its
values disagree (:mod:`dream.contradictions`).

Two keys whose words are the same and whose numbers or ids differ (``phone_1``, ``phone2``) name two items of
one list, never one meaning: :func:`numbered_apart`.
"""

import re

_SEGMENTS = re.compile(r"/|%2[Ff]")  # LangGraph writes labels as key segments, a "/" inside an item as %2F
_TOKENS = re.compile(r"[_.:\-\s]+")
_UUID = re.compile(r"[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}")
_DIGIT = re.compile(r"\d")  # 1, 09, 7f3a, 3f2a9c4e, 01hzx3k9 (a word's trailing number is split off first)
_LONG_HEX = re.compile(r"[0-9a-f]{16,}")  # no word of 16 letters is spelled with a-f alone
_LETTER = re.compile(r"[^\W\d_]")
_TRAILING_NUMBER = re.compile(r"([^\W\d_]{2,})(\d+)")  # phone2: the word phone, the number 2


def _is_id(token: str) -> bool:
    """A token with a digit (``09``, ``7f3a``, a ULID), a long hex id, or one of fewer than two letters."""
    return bool(_DIGIT.search(token) or _LONG_HEX.fullmatch(token) or len(_LETTER.findall(token)) < 2)


def _item(key: str) -> str:
    """A key's last path segment, casefolded: the item's name under a namespace such as ``memories/``."""
    return _SEGMENTS.split(key.strip().casefold())[-1].strip()


def _tokens(text: str) -> list[str]:
    """The words and ids of a text, a word's trailing number apart (``phone2``: ``phone``, ``2``)."""
    tokens: list[str] = []
    for token in _TOKENS.split(text):
        numbered = _TRAILING_NUMBER.fullmatch(token)
        tokens.extend(numbered.groups() if numbered else [token] if token else [])
    return tokens


def key_carries_meaning(key: str) -> bool:
    """Whether ``key`` names what its value is about: its item (the last ``/`` segment: ``food`` in
    ``memories/food``, ``1`` in ``memories/1``) holds a word. Opaque: all digits (``1``, ``0042``), a uuid or
    hex id (with or without dashes), a short letter-and-digit id (``m-7f3a``, ``k-09``, ``D1:3``), or a
    path whose last segment is one of those (``memories/1``, ``memories/<uuid>``)."""
    item = _item(key)
    if not item or _UUID.fullmatch(item):
        return False
    return any(not _is_id(token) for token in _tokens(item))


def _words_and_ids(key: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    tokens = [t for segment in _SEGMENTS.split(key.casefold()) for t in _tokens(segment)]
    return tuple(t for t in tokens if not _is_id(t)), tuple(t for t in tokens if _is_id(t))


def key_words(key: str) -> frozenset[str]:
    """The words of a key (its numbers and ids left out): ``open_ticket`` holds ``open`` and ``ticket``."""
    return frozenset(_words_and_ids(key)[0])


def numbered_apart(first: str, second: str) -> bool:
    """Whether two keys of the same words differ only in their numbers or ids (``phone_1``/``phone_2``,
    ``phone``/``phone2``, ``child_1_name``/``child_2_name``): two items of one list, not one meaning."""
    first_words, first_ids = _words_and_ids(first)
    second_words, second_ids = _words_and_ids(second)
    return first_words == second_words and first_ids != second_ids


def key_pattern_regex(pattern: str) -> str:
    """The PostgreSQL regular expression of a key pattern (a list's ``keyPattern``): the key's ``/``-separated
    segments, ``*`` any one segment, ``**`` any number of them (none too), any other segment itself. The
    whole key matches: ``*/prefs/*`` is a key of three segments whose second is ``prefs``; ``memories/**``
    ``memories`` and any key under ``memories/``. LangGraph's namespace wildcards (``MatchCondition``) are
    segments."""
    if pattern == "**":
        return "^.*$"
    regex, after_any = "", False  # after_any: the last piece was a ``**`` that took the next slash with it
    for index, segment in enumerate(pattern.split("/")):
        slash = "/" if index and not after_any else ""
        if segment == "**":
            # any segments, each with its slash: before the next segment, or after the previous one
            regex += "(/[^/]*)*" if index else "([^/]*/)*"
            after_any = index == 0
            continue
        regex += slash + ("[^/]*" if segment == "*" else re.escape(segment))
        after_any = False
    return f"^{regex}$"
