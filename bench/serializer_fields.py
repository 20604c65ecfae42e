"""The input serializers of the hot path with DRF's own field handling, beside the former ``FieldsBuiltOnce``
(issue 48, part 6), in one process.

``FieldsBuiltOnce`` (removed from ``memoryplatform.api.serializers``) overrode DRF's
``Serializer.fields`` with a thread-local ``BindingDict`` built once per class, so an instance did not
deep-copy its declared fields. It is reproduced here only to measure what its removal costs: each serializer
is timed as the code now declares it (DRF deep-copies the fields for every instance) and as a subclass with
the former override, alternately, in rounds, on a typical upsert body, a recall's query string and a user
list's. No database: the serializers validate types only.

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


def _validate(cls: type, data: Any) -> Callable[[], None]:
    def once() -> None:
        serializer = cls(data=data)
        if not serializer.is_valid():
            raise AssertionError(serializer.errors)

    return once


def _per_call_us(call: Callable[[], None], n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        call()
    return (time.perf_counter() - start) / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=2000, help="validations per timing")
    parser.add_argument("--rounds", type=int, default=7, help="alternate rounds (the median is printed)")
    args = parser.parse_args()
    _setup()
    print(
        f"| payload | DRF's fields (now), us | former FieldsBuiltOnce, us | now / former |  (n={args.n}, "
        f"median of {args.rounds} alternate rounds)"
    )
    print("|---|---|---|---|")
    for name, (cls, data) in _cases().items():
        former = type(f"Former{cls.__name__}", (_FormerFieldsBuiltOnce, cls), {})
        now_call, former_call = _validate(cls, data), _validate(former, data)
        now_call(), former_call()  # warm: caches, imports
        now_us: list[float] = []
        former_us: list[float] = []
        for _ in range(args.rounds):
            now_us.append(_per_call_us(now_call, args.n))
            former_us.append(_per_call_us(former_call, args.n))
        now, before = statistics.median(now_us), statistics.median(former_us)
        print(f"| {name} | {now:.1f} | {before:.1f} | {now / before:.2f} |")


if __name__ == "__main__":
    main()
