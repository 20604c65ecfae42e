"""The input serializers of the hot path with DRF's own field handling, beside the former ``FieldsBuiltOnce``
(issue 48, part 6), in one process.

``FieldsBuiltOnce`` (removed from ``memoryplatform.api.serializers``) overrode DRF's ``Serializer.fields``
with a thread-local ``BindingDict`` built once per class, so an instance did not deep-copy its declared
fields. It is reproduced here only to measure what its removal costs. Each serializer is timed three ways,
alternately, in rounds: through ``memoryplatform.api.serializers.Validator`` (one instance per thread, DRF's
public ``run_validation``: what the hot path does now), as DRF's default (an instance per body, every field
deep-copied) and as a subclass with the former override, on a typical upsert body, a recall's query string
and a user list's. No database: the serializers validate types only. Each figure is the thread's CPU time
per validation (``time.thread_time``), so a busy machine does not skew it.

    DATA_DIR=/tmp/bench PYTHONPATH=. .venv/bin/python -m bench.serializer_fields --n 2000 --rounds 7
"""

import argparse
import os
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

import django


def _setup() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryplatform.settings")
    django.setup()


class _FormerFieldsBuiltOnce:
    """The former ``memoryplatform.api.serializers.FieldsBuiltOnce`` (its ``fields`` property), verbatim:
    the declared fields built once per class and thread, re-pointed at each instance. Measurement only."""

    _built = threading.local()

    @property
    def fields(self) -> Any:
        from rest_framework.utils.serializer_helpers import BindingDict

        cache: dict[type, Any] = self._built.__dict__.setdefault("by_class", {})
        fields = cache.get(type(self))
        if fields is None:
            fields = BindingDict(self)  # type: ignore[arg-type]  # mixed into a serializer
            for name, field in self.get_fields().items():  # type: ignore[attr-defined]
                fields[name] = field
            cache[type(self)] = fields
        elif fields.serializer is not self:
            fields.serializer = self
            for field in fields.values():
                field.parent = self
        return fields


def _cases() -> dict[str, tuple[type, Any]]:
    from django.http import QueryDict

    from usermemory.api.serializers import (
        MemoryUpsertInputSerializer,
        UserListQuerySerializer,
        VisibleQuerySerializer,
    )

    upsert = {
        "userId": "user-1",
        "key": "preferences/language",
        "value": {"language": "Portuguese", "since": 2019},
        "category": "preference",
        "visibility": "group",
        "groupIds": ["support"],
        "confidence": 0.9,
        "source": "user_correction",
    }
    recall = QueryDict("q=which+language+does+she+prefer&limit=20&mode=hybrid&minScore=0.2")
    listing = QueryDict("limit=50&offset=0&keyPrefix=preferences/")
    return {
        "upsert body (MemoryUpsertInputSerializer)": (MemoryUpsertInputSerializer, upsert),
        "recall query (VisibleQuerySerializer)": (VisibleQuerySerializer, recall),
        "user list query (UserListQuerySerializer)": (UserListQuerySerializer, listing),
    }


def _instance_per_body(cls: type, data: Any) -> Callable[[], None]:
    def once() -> None:
        serializer = cls(data=data)
        if not serializer.is_valid():
            raise AssertionError(serializer.errors)

    return once


def _validator(cls: type, data: Any) -> Callable[[], None]:
    from memoryplatform.api.serializers import Validator

    validate = Validator(cls)

    def once() -> None:
        validate(data)

    return once


def _per_call_us(call: Callable[[], None], n: int) -> float:
    start = time.thread_time()  # CPU time: the figure holds on a busy machine
    for _ in range(n):
        call()
    return (time.thread_time() - start) / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=2000, help="validations per timing")
    parser.add_argument("--rounds", type=int, default=7, help="alternate rounds (the median is printed)")
    args = parser.parse_args()
    _setup()
    print(
        f"CPU us per validation (n={args.n}, median of {args.rounds} alternate rounds)\n\n"
        "| payload | Validator (now: upsert, append, usermemory's queries) | a DRF instance per body "
        "(DRF's default) | former FieldsBuiltOnce | Validator / former |"
    )
    print("|---|---|---|---|---|")
    for name, (cls, data) in _cases().items():
        former = type(f"Former{cls.__name__}", (_FormerFieldsBuiltOnce, cls), {})
        calls = {
            "validator": _validator(cls, data),
            "instance": _instance_per_body(cls, data),
            "former": _instance_per_body(former, data),
        }
        timings: dict[str, list[float]] = {kind: [] for kind in calls}
        for call in calls.values():
            call()  # warm: caches, imports
        for _ in range(args.rounds):
            for kind, call in calls.items():
                timings[kind].append(_per_call_us(call, args.n))
        median = {kind: statistics.median(values) for kind, values in timings.items()}
        print(
            f"| {name} | {median['validator']:.1f} | {median['instance']:.1f} | {median['former']:.1f} "
            f"| {median['validator'] / median['former']:.2f} |"
        )


if __name__ == "__main__":
    main()
