"""The size rule every batch write shares (memories, messages): all or nothing, 1 to a bound."""

from memoryplatform.errors import BadRequest


def batch_size_check(*, count: int, most: int, items: str, empty: str) -> None:
    """A batch holds 1 to ``most`` items: ``empty`` is the refusal of none, ``items`` (plural) names them in
    the refusal of too many."""
    if not count:
        raise BadRequest(empty)
    if count > most:
        raise BadRequest(f"A batch holds at most {most} {items}; got {count}.")
