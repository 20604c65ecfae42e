"""API routes: every path answers with and without a trailing slash, and path values may hold any text.

EDDI's and memory-service's clients differ on trailing slashes, and a redirect is no answer to a PUT, POST or
DELETE, so :func:`api_path` builds one route that matches both forms. A ``userId``, ``key`` or ``category``
may hold ``/``, spaces and any unicode, percent-encoded in the path:

- :class:`EncodedPathMiddleware` gives the URL resolver the path *as sent*, still percent-encoded, when the
  server passes it on (the ASGI scope's ``raw_path``; a WSGI server's ``RAW_URI`` or ``REQUEST_URI``). An
  encoded ``/`` (``%2F``) then stays inside its value, so every value is exact.
- Where the server passes only the decoded path (Django's test client and ``runserver``), the middleware
  encodes it again; ``%2F`` has already become ``/`` there. A value's pattern is non-greedy and the fixed
  suffixes decide (``/visible``, ``/count``, ``/key/...``), so ``org/u8`` still routes, unless the value
  itself ends in a fixed suffix (a userId ``u/count``) or starts like a fixed path (``entry/1``): those stay
  ambiguous without the raw path (the README says so).
- :func:`api_path` decodes each captured value once, before the view sees it.
"""

import re
from collections.abc import Callable
from functools import wraps
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from django.http import Http404, HttpRequest, HttpResponse
from django.urls import URLPattern, re_path

from memoryplatform import publicids
from memoryplatform.text import ascii_int

# What each kind of placeholder matches. "str": one path segment (with the raw path, an encoded "/" stays
# inside it). "int": one segment that must be an id, else the 404 of an unknown id. "entry", "task": one
# segment that must be such a public id (or a legacy one, memoryplatform.publicids), given to the view as the
# internal id, else that 404. "text": any text, "/" included, as few characters as will do, so the fixed parts
# after it decide where it ends.
KINDS = {"str": r"[^/]+", "int": r"[^/]+", "entry": r"[^/]+", "task": r"[^/]+", "text": r"[\s\S]+?"}
PUBLIC_ID_KINDS: dict[str, publicids.Kind] = {"entry": publicids.ENTRY, "task": publicids.TASK}
_PLACEHOLDER = re.compile(r"<(?:(?P<kind>str|text|int|entry|task):)?(?P<name>\w+)>")

# Paths the resolver sees as sent (percent-encoded); the admin and static files keep Django's decoded path.
DECODED_PREFIXES = ("/admin/", "/static/")


def _literal(text: str) -> str:
    """A fixed part of a route as a regex. ``-`` stays unescaped (literal outside a character class), so
    the schema generator, which shows the pattern's text, documents ``tool-calls``, not ``tool\\-calls``."""
    return re.escape(text).replace("\\-", "-")


def _pattern(route: str) -> str:
    """``a/<name>/b/<int:n>`` as a regex matching it with or without a trailing slash."""
    parts, end = [], 0
    for match in _PLACEHOLDER.finditer(route):
        parts.append(_literal(route[end : match.start()]))
        parts.append(f"(?P<{match['name']}>{KINDS[match['kind'] or 'str']})")
        end = match.end()
    parts.append(_literal(route[end:]))
    return "^" + "".join(parts) + "/?$"


def _id(value: str, kind: str) -> int:
    """An ``<int:...>`` path value as an id, an ``<entry:...>`` or ``<task:...>`` one as the internal id its
    public id names; 404 (no such id) unless it is one."""
    public_kind = PUBLIC_ID_KINDS.get(kind)
    entry_id = ascii_int(value) if public_kind is None else publicids.parse(public_kind, value)
    if entry_id is None:
        raise Http404(f"No id '{value}'.")
    return entry_id


def _decoded(view: Callable[..., HttpResponse], integers: dict[str, str]) -> Callable[..., HttpResponse]:
    """The view, given each path value decoded once (and id values as ints)."""

    @wraps(view)  # keeps the DRF view's attributes (cls, initkwargs, csrf_exempt) for the schema generator
    def decoded_view(request: HttpRequest, *args: Any, **kwargs: str) -> HttpResponse:
        values: dict[str, Any] = {name: unquote(v) for name, v in kwargs.items()}
        for name, kind in integers.items():
            if name in values:
                values[name] = _id(values[name], kind)
        return view(request, *args, **values)

    return decoded_view


def api_path(route: str, view: Callable[..., HttpResponse], name: str) -> URLPattern:
    """One API route, answering ``route`` and ``route/``.

    ``<name>`` captures one segment and ``<text:name>`` any text (``/`` included), each decoded;
    ``<int:name>`` one segment that must be a 64-bit id, as an ``int`` (anything else is a 404);
    ``<entry:name>``, ``<task:name>`` one that must be such a public id, as the internal ``int``. List a
    route whose fixed suffix a ``text`` value would otherwise swallow (``<text:user_id>/count``) before the
    bare one (``<text:user_id>``).
    """
    integers = {
        m["name"]: m["kind"] for m in _PLACEHOLDER.finditer(route) if m["kind"] in ("int", *PUBLIC_ID_KINDS)
    }
    decoded = _decoded(view, integers)
    decoded.log_route = route  # type: ignore[attr-defined]  # what the log names (memoryplatform.logsafe)
    return re_path(_pattern(route), decoded, name=name)


def _raw_path(request: HttpRequest) -> str | None:
    """The path as the client sent it, percent-encoded, when the server passes it on; else ``None``."""
    scope = getattr(request, "scope", None)  # Django's ASGI request
    if scope is not None:
        raw = scope.get("raw_path")
        if not raw:
            return None
        raw_path = raw.decode("latin-1") if isinstance(raw, bytes) else str(raw)
    else:
        target = request.META.get("RAW_URI") or request.META.get("REQUEST_URI")
        if not target:
            return None
        raw_path = urlsplit(target).path if "://" in target.split("?", 1)[0] else target
    return raw_path.split("?", 1)[0].split("#", 1)[0]


def sent_path(request: HttpRequest) -> str:
    """The path percent-encoded as the client sent it: the raw path when the server passes it on; else the
    decoded path encoded again, where Django has already re-escaped bytes that are not UTF-8 (``%FF``), so
    that they are found again (as is a literal ``%FF`` sent as ``%25FF``: the two read alike there)."""
    raw = _raw_path(request)
    return raw if raw is not None else quote(request.path_info, safe="/%")


def encoded_path_info(request: HttpRequest) -> str:
    """``request.path_info`` percent-encoded as the client sent it, or encoded again when the raw form is not
    available or does not match the decoded path (a proxy that rewrote it)."""
    path_info = request.path_info
    raw = _raw_path(request)
    if raw is not None:
        script_name = quote(request.META.get("SCRIPT_NAME", "") or "")
        if script_name and raw.startswith(script_name):
            raw = raw[len(script_name) :]
        if unquote(raw) == path_info:
            # One spelling per path: "%75" and "u" alike become "u"; an encoded "/" stays "%2F".
            return "/".join(quote(unquote(segment), safe="") for segment in raw.split("/"))
    return quote(path_info, safe="/")


class EncodedPathMiddleware:
    """Resolves API paths on their percent-encoded form (see the module docstring)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if not request.path_info.startswith(DECODED_PREFIXES):
            request.path_info = encoded_path_info(request)
        return self.get_response(request)


def schema_without_trailing_slash(endpoints: list[tuple[Any, ...]], **kwargs: Any) -> list[tuple[Any, ...]]:
    """drf-spectacular preprocessing hook: document each :func:`api_path` route in its form without the
    trailing slash (both are served; the generator would otherwise print the optional ``/`` as a ``/``)."""
    documented = []
    for path, path_regex, *rest in endpoints:
        if path_regex.endswith("/?$") and path.endswith("/"):
            path = path[:-1]
        documented.append((path, path_regex, *rest))
    return documented
