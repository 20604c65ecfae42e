"""Checks on text and JSON that every door applies before a value can reach the database.

PostgreSQL refuses NUL (``\\u0000``) in text and jsonb, and no database can store a lone surrogate
(``"\\ud800"``: not encodable as UTF-8). A number such as ``1e400`` parses as infinity, which no JSON
column stores and no JSON answer can carry. A value nested deeper than :data:`MAX_JSON_DEPTH` is refused too,
so no later step (rendering, search text, Dream) recurses without bound. A key given twice in one object
is refused too (:func:`json_loads`): a proxy or an audit log that reads the first one would otherwise see
another value than the one written. A query longer than :data:`MAX_QUERY_CHARS`, or of more than
MAX_QUERY_TOKENS tokens to embed, is refused at every door, before anything embeds or parses it. A text that
shows nothing (white space, zero-width and other format characters) is blank wherever a door refuses a blank
one (:func:`is_blank`).
"""

import json
import math
import unicodedata
from typing import Any, NamedTuple

from django.conf import settings

from memoryplatform.embeddings import query_tokens
from memoryplatform.errors import BadRequest

MAX_JSON_DEPTH = 64
MAX_REQUEST_TARGET = 16 * 1024
"""Bytes of a request's path and query string as sent (percent-encoded): a longer one is a 414 in the
envelope. Well above what any route needs (a 1,000-character ``q`` of 4-byte characters is 12,000 bytes
encoded), and below the servers' own limits, which answer in plain text (uvicorn's about 64 KB)."""

MAX_QUERY_CHARS = 1000
"""The longest query any door takes, defined here once: REST's ``q`` (a user's search, search across users,
recall by relevance, a conversation's context, conversation search), the LLM tools' ``query`` and MCP's,
each read from this constant (serializer ``max_length``, the tools' ``maxLength``). The Python client mirrors
it as ``memoryplatform_client.MAX_QUERY_CHARS`` (a test holds the two equal). A query is embedded whole, so
this bounds what one search costs; the embedder's own bound is EMBEDDINGS_MAX_CHARS. It bounds the query as
the embedder and the keyword search read it too, normalized (NFKC) and casefolded (:func:`folded_length`):
U+FDFA is one character and 18 once normalized, so 1,000 of them were 450 tokens to embed, twice what 1,000
characters of English are (218), and 1,000 of U+3300 were 1,006 (issue 53). Characters still do not bound
the cost: 1,000 of Chinese are 742 tokens, 500 U+FCDF (1,000 once normalized) 1,006, where 1,000 of English
are 209-366; so a query is bounded in the embedder's tokens too (the setting MAX_QUERY_TOKENS)."""
MAX_ID = 2**63 - 1
"""The largest id a 64-bit primary key holds."""


def ascii_int(text: str, *, low: int = 0, high: int = MAX_ID) -> int | None:
    """The whole number ``text`` writes in ASCII digits, if it lies in ``low..high``; else ``None``.

    ``str.isdigit`` and ``int()`` also read other scripts' digits (``"١"`` is 1), so one id would answer to
    many spellings; and an unbounded number reaches the database as an out-of-range error.
    """
    if not (text.isascii() and text.isdigit()) or len(text) > len(str(high)):
        return None
    value = int(text)
    return value if low <= value <= high else None


def folded_length(text: str) -> int:
    """The characters of ``text`` as a search reads it: normalized (NFKC, as the embedder reads it) and
    casefolded (as the keyword search does). ASCII is its own NFKC form and folds to as many characters."""
    if text.isascii():
        return len(text)
    return len(unicodedata.normalize("NFKC", text).casefold())


def query_problem(query: str, *, name: str = "q") -> str | None:
    """Why ``query`` is refused as a search or recall query, or ``None``: :func:`query_refusal`'s words."""
    refusal = query_refusal(query, name=name)
    return refusal.message if refusal else None


class QueryRefusal(NamedTuple):
    message: str
    limit: str
    max: int


def query_refusal(query: str, *, name: str = "q") -> QueryRefusal | None:
    """Why ``query`` is refused as a search or recall query, or ``None``: too long in characters, as given or
    as a search reads it (:func:`folded_length`), or in the embedder's tokens (MAX_QUERY_TOKENS: what its
    cost follows, :func:`memoryplatform.embeddings.query_tokens`). The given length is checked first, so the
    normalizing and the counting are bounded."""
    if len(query) > MAX_QUERY_CHARS:
        message = f"{name} is {len(query)} characters; a query may have at most {MAX_QUERY_CHARS}."
        return QueryRefusal(message, "MAX_QUERY_CHARS", MAX_QUERY_CHARS)
    folded = folded_length(query)
    if folded > MAX_QUERY_CHARS:
        message = (
            f"{name} is {len(query)} characters but {folded} once normalized (NFKC) and casefolded; a query "
            f"may have at most {MAX_QUERY_CHARS}, counted either way."
        )
        return QueryRefusal(message, "MAX_QUERY_CHARS", MAX_QUERY_CHARS)
    tokens, most = query_tokens(query), settings.MAX_QUERY_TOKENS
    if tokens is not None and tokens > most:
        message = (
            f"{name} is {len(query)} characters but {tokens} tokens as the embedder reads it; a query may "
            f"have at most {most} tokens."
        )
        return QueryRefusal(message, "MAX_QUERY_TOKENS", most)
    return None


def check_query(query: str, *, name: str = "q") -> None:
    """Refuse a query over :data:`MAX_QUERY_CHARS`, as given or as a search reads it, or over MAX_QUERY_TOKENS
    (:class:`BadRequest`): the selectors' own check, so a door that forgot the limit still never embeds or
    parses a longer one."""
    refusal = query_refusal(query, name=name)
    if refusal:
        raise BadRequest(refusal.message, details={"limit": refusal.limit, "max": refusal.max})


def text_problem(text: str) -> str | None:
    """Why ``text`` cannot be stored, or ``None`` when it can."""
    if "\x00" in text:
        return "contains a NUL character (\\u0000)"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "contains a lone surrogate (not valid Unicode)"
    return None


_IGNORABLE = frozenset(
    "\u034f\u115f\u1160\u17b4\u17b5\u180b\u180c\u180d\u180f\u3164\uffa0"  # CGJ, fillers, FVS
    + "".join(map(chr, range(0xFE00, 0xFE10)))  # variation selectors
    + "".join(map(chr, range(0xE0100, 0xE01F0)))  # variation selectors supplement
)
"""Default-ignorable characters (Unicode's Default_Ignorable_Code_Point) that are not of category Cf."""


def is_blank(text: str) -> bool:
    """Whether ``text`` shows nothing: each of its characters (if any) is white space, a control or format
    character (categories Cc and Cf: zero-width spaces and joiners, the word joiner, the BOM, bidi marks)
    or another default-ignorable one (variation selectors, Hangul fillers). ``str.strip`` keeps the format
    characters, so ``"\u200b"`` would pass a check of ``not text.strip()``; a door that refuses a blank
    text asks this."""
    return all(c.isspace() or c in _IGNORABLE or unicodedata.category(c) in ("Cc", "Cf") for c in text)


def target_too_long(length: int) -> str | None:
    """Why a request target (path and query string, as sent) of ``length`` bytes is refused (a 414), or
    ``None``."""
    if length <= MAX_REQUEST_TARGET:
        return None
    return (
        f"The request line is too long: its path and query string hold at most {MAX_REQUEST_TARGET} bytes "
        f"as sent; got {length}."
    )


def path_bytes_problem(path: bytes) -> str | None:
    """Why a path, percent-decoded to its bytes, is refused (a 400), or ``None``. Bytes that are not UTF-8
    (``%FF``, or ``%ED%A0%80``, an encoded surrogate) name no text: decoded leniently, as servers do, two such
    paths would become one ``\ufffd`` and name one user."""
    try:
        path.decode("utf-8")
    except UnicodeDecodeError:
        return "The path is not valid UTF-8 once percent-decoded; encode each value's text as UTF-8."
    return None


def json_problem(value: Any, *, max_depth: int = MAX_JSON_DEPTH) -> str | None:
    """Why a parsed JSON value cannot be stored (a bad string or key anywhere, or too deep), or ``None``.

    Walks with an explicit stack, so a deep value cannot exhaust Python's recursion limit here.
    """
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            problem = text_problem(item)
            if problem:
                return f"a string {problem}"
        elif isinstance(item, float) and not math.isfinite(item):
            return "a number is out of range (JSON numbers are finite)"
        elif isinstance(item, dict | list):
            if depth > max_depth:
                return f"nested more than {max_depth} levels deep"
            if isinstance(item, dict):
                for key, child in item.items():
                    stack.append((key, depth))
                    stack.append((child, depth + 1))
            else:
                stack.extend((child, depth + 1) for child in item)
    return None


def json_refusal(problem: str) -> str:
    """The words every door refuses a body (or tool arguments) with for :func:`json_problem`'s ``problem``:
    REST and the LLM tools (a 400, :class:`memoryplatform.api.parsers.StrictJSONParser`) and MCP (a tool
    error)."""
    return f"JSON parse error - {problem}."


def storable_text(text: str) -> str:
    """``text`` as a database can store it: a NUL written as the six characters ``\\u0000`` and a lone
    surrogate as its ``\\udXXX`` escape, everything else as it is. For a record of what was sent (a tool
    call's log), never for a value a door stores: those are refused (:func:`text_problem`)."""
    if not text_problem(text):
        return text
    return text.replace("\x00", "\\u0000").encode("utf-8", "backslashreplace").decode("utf-8")


TOO_DEEP = "(nested too deeply to record)"


def storable_json(value: Any, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """A copy of a parsed JSON ``value`` that a jsonb column stores (:func:`json_problem` finds nothing in
    it): strings and keys through :func:`storable_text`, a number out of range as its text, and a value
    nested deeper than ``max_depth`` as :data:`TOO_DEEP`. The value itself when it is storable already."""
    if json_problem(value, max_depth=max_depth) is None:
        return value
    return _storable(value, max_depth)


def _storable(value: Any, depth_left: int) -> Any:
    if isinstance(value, str):
        return storable_text(value)
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict | list):
        if depth_left <= 0:
            return TOO_DEEP
        if isinstance(value, list):
            return [_storable(item, depth_left - 1) for item in value]
        return {storable_text(str(k)): _storable(v, depth_left - 1) for k, v in value.items()}
    return value


class DuplicateKey(ValueError):
    """A JSON object names one key twice: which value was meant is not for the server to guess."""

    def __init__(self, key: str) -> None:
        shown = key if len(key) <= 100 else f"{key[:100]}..."
        # Named as JSON: a key holding a lone surrogate or a NUL is escaped, so the answer can always be sent.
        super().__init__(f"the key {json.dumps(shown)} appears more than once in one object")
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKey(key)
            seen.add(key)
    return obj


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def json_loads(text: str | bytes, *, strict: bool = True) -> Any:
    """``json.loads`` for a request body, as every door parses one: a key given twice in one object raises
    :class:`DuplicateKey` (a ``ValueError``), naming it; with ``strict``, ``NaN`` and ``Infinity`` are
    refused. Other checks on the value are :func:`json_problem`'s."""
    return json.loads(
        text, object_pairs_hook=_unique_keys, parse_constant=_refuse_constant if strict else None
    )


def duplicate_key_problem(body: bytes) -> str | None:
    """Why a JSON body is refused for naming a key twice in one object, or ``None`` (for any other body,
    valid or not: a door that parses the body itself answers the rest)."""
    try:
        json_loads(body, strict=False)
    except DuplicateKey as exc:
        return str(exc)
    except (ValueError, RecursionError):
        return None
    return None
