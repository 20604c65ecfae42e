"""Strict query strings: a query parameter that a GET's OpenAPI operation does not list is a 400 naming it,
with the one meant when the name is close (``min_score: unknown query parameter; did you mean minScore?``),
as an unknown body field is (:class:`memoryplatform.api.serializers.StrictInput`). Ignored, a guessed or
misspelt parameter (``min_score``, ``top_k``, ``threshold``) would give an answer that only looks filtered.

A parameter given twice (``visibility=self&visibility=global``, ``minScore=0.99&minScore=0``) is a 400 too,
unless its operation declares it a list (``type: array``): read as one value, the last one would win, and a
filter or a threshold the caller gave would be dropped without a word.

One source of truth: the schema drf-spectacular generates, whose operations list the parameters of each
view's query serializer (``extend_schema(parameters=...)``), FilterSet and paginator. A parameter a view reads
and the schema does not list is refused too, so the documentation cannot fall behind the code. Besides
those, every GET takes DRF's renderer override, ``format`` (``json``, or ``api`` for the browsable API),
which drf-spectacular does not list.

The check runs before the view, in a middleware, like the other checks of the request target
(:class:`config.middleware.RefuseUnstorableTextMiddleware`): an unknown parameter is a 400 whoever
asks, as the schema that lists them is public. Only the GETs of the REST API are checked: the admin,
``/healthz``, ``/readyz``, ``/metrics``, the schema and docs pages and ``/mcp`` are no operations of the
schema (and MCP's JSON arguments are checked by their tools).
"""

import re
import threading
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse, QueryDict
from django.urls import Resolver404, get_urlconf, resolve
from drf_spectacular.generators import SchemaGenerator
from rest_framework.settings import api_settings

from memoryplatform.api.errors import invalid_input
from memoryplatform.api.serializers import unknown_names

# Names other APIs use, and the parameter meant here (the first one the operation takes), for the message.
HINTS: Mapping[str, tuple[str, ...]] = {
    "k": ("limit",),
    "top_k": ("limit",),
    "topK": ("limit",),
    "page_size": ("limit",),
    "pageSize": ("limit",),
    "threshold": ("minScore", "minConfidence"),
    "min_relevance": ("minScore",),
}

CHECKED_METHODS = frozenset({"GET", "HEAD"})  # HEAD is served by the view's GET

_PLACEHOLDER = re.compile(r"\{[^{}/]+\}")
_SAMPLE_VALUE = "0"  # a path value no fixed segment of a route equals, so the route of the operation matches


class Accepted(NamedTuple):
    """The query parameters one GET takes, the hints that name one of them, and those that are lists (may be
    given more than once)."""

    names: frozenset[str]
    hints: Mapping[str, str]
    lists: frozenset[str] = frozenset()


def every_get() -> frozenset[str]:
    """The parameters every GET takes whatever its operation lists: DRF's ``format``."""
    return frozenset(filter(None, [api_settings.URL_FORMAT_OVERRIDE]))


def accepted_by_view(urlconf: str) -> dict[Callable[..., Any], Accepted]:
    """Each GET's view (the URL pattern's callback) and the query parameters its operation in the generated
    schema lists. A schema path is resolved with a sample value in each placeholder, as a request would be."""
    schema = SchemaGenerator(urlconf=urlconf).get_schema(request=None, public=True)
    table = {}
    for path, operations in schema["paths"].items():
        operation = operations.get("get")
        if operation is None:
            continue
        try:
            view = resolve(_PLACEHOLDER.sub(_SAMPLE_VALUE, path), urlconf).func
        except Resolver404:  # not served as documented: nothing to check (tests walk every operation)
            continue
        query = [p for p in operation.get("parameters", ()) if p["in"] == "query"]
        names = every_get() | {p["name"] for p in query}
        lists = frozenset(p["name"] for p in query if p.get("schema", {}).get("type") == "array")
        hints = {
            wrong: next(meant for meant in candidates if meant in names)
            for wrong, candidates in HINTS.items()
            if any(meant in names for meant in candidates)
        }
        table[view] = Accepted(frozenset(names), hints, lists)
    return table


_tables: dict[str, dict[Callable[..., Any], Accepted]] = {}
_building = threading.Lock()


def accepted_parameters(view: Callable[..., Any]) -> Accepted | None:
    """The query parameters the GET served by ``view`` takes; None for a view that is no GET operation of the
    API. The schema is generated once per process (about 0.3 s), at the first query string that asks."""
    urlconf = get_urlconf() or settings.ROOT_URLCONF
    table = _tables.get(urlconf)
    if table is None:
        with _building:
            table = _tables.get(urlconf)
            if table is None:
                table = _tables[urlconf] = accepted_by_view(urlconf)
    return table.get(view)


def refused_parameters(view: Callable[..., Any], query: QueryDict) -> dict[str, list[str]]:
    """Each parameter of ``query`` the GET served by ``view`` does not take, or takes once and is given more
    than once, with its message."""
    accepted = accepted_parameters(view)
    if accepted is None:
        return {}
    errors = unknown_names(query, accepted=accepted.names, hints=accepted.hints, what="query parameter")
    for name, values in query.lists():
        if len(values) > 1 and name not in accepted.lists and name not in errors:
            errors[name] = [f"given {len(values)} times; this query parameter takes one value."]
    return errors


class StrictQueryMiddleware:
    """A GET of the REST API with a query parameter its operation does not list, or one given more than
    once that is no list: a 400 in the envelope, ``details.fields`` naming each (as for a body's unknown
    fields)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_view(
        self, request: HttpRequest, view: Callable[..., Any], args: Any, kwargs: Any
    ) -> HttpResponse | None:
        if request.method not in CHECKED_METHODS or not request.META.get("QUERY_STRING"):
            return None
        errors = refused_parameters(view, request.GET)
        if not errors:
            return None
        return JsonResponse(invalid_input(errors), status=400)
