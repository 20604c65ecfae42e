"""The size rule every batch write shares (memories, messages): all or nothing, 1 to a bound; and the
batched delete every retention pass shares (tool calls, per-turn counters, events)."""

from collections.abc import Callable
from typing import Any

from django.db import transaction
from django.db.models import QuerySet

from memoryplatform.errors import BadRequest


def batch_size_check(*, count: int, most: int, items: str, empty: str) -> None:
    """A batch holds 1 to ``most`` items: ``empty`` is the refusal of none, ``items`` (plural) names them in
    the refusal of too many."""
    if not count:
        raise BadRequest(empty)
    if count > most:
        raise BadRequest(f"A batch holds at most {most} {items}; got {count}.")


def delete_in_batches(
    expired: QuerySet[Any],
    *,
    batch_size: int,
    order_by: str = "id",
    before_delete: Callable[[list[Any]], object] | None = None,
) -> int:
    """Delete the rows ``expired`` matches, ``batch_size`` a transaction in ``order_by``'s order (short
    transactions beside the writers; related rows go with each batch, as Django's delete takes them), until a
    batch comes back short. ``before_delete`` gets each batch's primary keys in its transaction, before they
    go (what it writes commits with the delete). Returns how many went; two passes at once delete each row
    once."""
    model = expired.model
    total = 0
    while True:
        with transaction.atomic():
            ids = list(expired.order_by(order_by).values_list("pk", flat=True)[:batch_size])
            if ids:
                if before_delete is not None:
                    before_delete(ids)
                model._default_manager.filter(pk__in=ids).delete()
        total += len(ids)
        if len(ids) < batch_size:
            return total
