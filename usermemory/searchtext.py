"""The search columns of an entry, computed in this one place for every write (upserts, conflict resolution,
Dream's summaries): the value's text and the casefolded key and text the per-user search reads."""

import json
import re
from typing import Any, NamedTuple


def value_as_text(value: Any) -> str:
    """The searchable text of a value: a string's own content, anything else as compact JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


class SearchColumns(NamedTuple):
    value_text: str
    key_folded: str
    text_folded: str


def search_columns(*, key: str, text: str) -> SearchColumns:
    """The columns written with ``key`` and a value whose text (:func:`value_as_text`) is ``text``: casefolded
    in Python (``str.casefold``: "STRASSE" finds "straße"), which PostgreSQL before 18 cannot do."""
    return SearchColumns(value_text=text, key_folded=key.casefold(), text_folded=text.casefold())


_KEY_SEPARATORS = re.compile(r"[_./:-]+")


def key_text(key: str) -> str:
    """What the embedder reads of a key when keys are compared by meaning (Dream's contradictions by meaning,
    extraction's matching): ``"the user's <key>"``, its underscores, dots and slashes as spaces."""
    return "the user's " + _KEY_SEPARATORS.sub(" ", key).strip()
