"""How Dream's passes commit: bounded batches, each in its own transaction.

A batch picks the next ``size`` matching ids (keyset on id, rows locked with ``FOR UPDATE SKIP LOCKED``) and
hands them to a usermemory service, which writes one history event per row and applies the change, all in the
batch's transaction. A failure rolls back the batch it happened in and leaves earlier batches committed:
nothing is ever half applied.
"""

import time
from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet

from usermemory.models import MemoryEntry

DEFAULT_BATCH_SIZE = 2000
MAX_BATCH_SIZE = 10_000  # a batch's ids travel as one array parameter; bounded to keep transactions short


@dataclass
class Batching:
    """How a pass commits: ``size`` rows per transaction, ``pause`` seconds between transactions (to leave
    room for other writers), and ``after_batch(action, rows)`` called after each commit."""

    size: int = DEFAULT_BATCH_SIZE
    pause: float = 0.0
    after_batch: Callable[[str, int], None] | None = None

    @classmethod
    def from_settings(cls, *, size: int | None = None, pause: float | None = None) -> "Batching":
        size = size if size is not None else settings.DREAM_BATCH_SIZE
        pause = pause if pause is not None else settings.DREAM_BATCH_PAUSE
        if not 1 <= size <= MAX_BATCH_SIZE:
            raise ValueError(f"batch size must be between 1 and {MAX_BATCH_SIZE}, got {size}")
        return cls(size=size, pause=max(0.0, float(pause)))


def in_batches(
    *, select: QuerySet[MemoryEntry], apply: Callable[[list[int]], object], batching: Batching, action: str
) -> int:
    """Run ``apply`` on the ids ``select`` matches, ``batching.size`` at a time, each batch in its own
    transaction. Keyset on id, so every batch makes progress and the whole pass reads each row once."""
    last_id = 0
    total = 0
    while True:
        with transaction.atomic():
            ids = list(
                select.filter(id__gt=last_id)
                .select_for_update(skip_locked=True, of=("self",))
                .order_by("id")
                .values_list("id", flat=True)[: batching.size]
            )
            if ids:
                apply(ids)
        if not ids:
            return total
        total += len(ids)
        last_id = ids[-1]
        if batching.after_batch is not None:
            batching.after_batch(action, len(ids))
        if batching.pause:
            time.sleep(batching.pause)
