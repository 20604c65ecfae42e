"""What a Dream run records of its LLM work and its failures: counts, the first few failures (never every
one), and error texts without the values of the rows involved.

Every LLM call of a cycle (a group's summary, the confirmation of a contradiction by meaning) goes through
one :class:`LlmCalls`, which counts the calls made in the cycle and about each user, and refuses a call past
the policy's ``maxLlmCallsPerRun`` (the cycle's calls in all) or ``maxLlmCallsPerUser`` (the cycle's calls
about that user), whatever the calls cost. An entry is sent to the LLM for a summary at most once a cycle.
"""

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import psycopg
from django.db import DatabaseError

MAX_RECORDED_FAILURES = 10
"""A run keeps the first failures of each kind in its details; the rest are counted only."""


def record_failure(failures: list[Any], failure: Any) -> None:
    """Keep ``failure`` when fewer than :data:`MAX_RECORDED_FAILURES` are kept already."""
    if len(failures) < MAX_RECORDED_FAILURES:
        failures.append(failure)


def error_text(exc: BaseException) -> str:
    """An exception as a run records it. A database error gives its primary message only: the rest of its
    text (``DETAIL: Key (user_id, key)=(...)``, ``Failing row contains (...)``) holds the row's values."""
    cause = exc.__cause__
    if isinstance(exc, DatabaseError) and isinstance(cause, psycopg.Error) and cause.diag.message_primary:
        return f"{type(exc).__name__}: {cause.diag.message_primary}"
    return f"{type(exc).__name__}: {exc}"


@dataclass
class LlmCalls:
    """The LLM calls of one cycle: made in all and per user, the calls refused by a cap, and the entries
    already sent for a summary (``sent``: never sent twice in a cycle)."""

    made: int = 0
    by_user: Counter[str] = field(default_factory=Counter)
    refused_per_user: int = 0  # calls not made: their user had had maxLlmCallsPerUser calls
    stopped: list[str] = field(default_factory=list)  # uses that stopped at maxLlmCallsPerRun
    sent: set[int] = field(default_factory=set)

    def run_cap_reached(self, *, per_run: int) -> bool:
        return self.made >= per_run

    def take(self, *, user_id: str, per_run: int, per_user: int) -> bool:
        """Count a call about ``user_id`` and say yes, or say no when a cap is reached (the per-user refusal
        is counted; the caller records the per-run stop)."""
        if self.made >= per_run:
            return False
        if self.by_user[user_id] >= per_user:
            self.refused_per_user += 1
            return False
        self.made += 1
        self.by_user[user_id] += 1
        return True

    def give_back(self, *, user_id: str, entries: Iterable[int]) -> None:
        """Uncount a call :meth:`take` allowed but that was not made (the agent's LLM budget refused it),
        and its entries, which may be sent again this cycle."""
        self.made -= 1
        self.by_user[user_id] -= 1
        self.sent.difference_update(entries)

    def details(self) -> dict[str, Any]:
        return {
            "calls": self.made,
            "usersCalledFor": len(self.by_user),
            "refusedByPerUserCap": self.refused_per_user,
            "stoppedByCallCap": self.stopped,
        }
