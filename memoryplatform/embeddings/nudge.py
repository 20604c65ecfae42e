"""A write's nudge to the vector queue's task: as the write commits, ``vectors.drain`` is enqueued
(memoryplatform/tasks.py), so its texts get their vectors within moments; beat's sweep (the same task every
EMBEDDINGS_SWEEP_INTERVAL seconds) catches whatever a nudge missed (a broker that was down, a lost message).
One running drain takes every text queued before it reads the queue, so a process sends at most one nudge
per window (:class:`memoryplatform.nudge.Nudger`).
"""

import logging

from django.db import transaction

from memoryplatform.nudge import Nudger

logger = logging.getLogger(__name__)


def send() -> None:
    """Enqueue one ``vectors.drain``; a broker that does not answer is logged (the sweep drains later)."""
    from memoryplatform.tasks import vectors_drain

    try:
        vectors_drain.apply_async(retry=False)
    except Exception as exc:  # the broker: a write is never failed by its nudge
        logger.warning("Could not enqueue the vector queue's drain (%s); the sweep will", type(exc).__name__)


_nudger = Nudger(send)


def nudge_on_commit() -> None:
    """Nudge the vector queue's task once the current transaction commits (at once outside one)."""
    transaction.on_commit(_nudger.request, robust=True)
