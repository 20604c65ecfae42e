"""A write's nudge to the vector queue's task: as the write commits, ``vectors.drain`` is enqueued
(memoryplatform/tasks.py), so its texts get their vectors within moments; beat's sweep (the same task every
EMBEDDINGS_SWEEP_INTERVAL seconds) catches whatever a nudge missed (a broker that was down, a lost message).
One running drain takes every text queued before it reads the queue, so a process sends at most one nudge
per window (:class:`memoryplatform.nudge.Nudger`).
"""

from memoryplatform.broker import enqueue_once
from memoryplatform.nudge import Nudger


def _enqueue() -> None:
    from memoryplatform.tasks import vectors_drain

    enqueue_once(vectors_drain)


nudger = Nudger(_enqueue, what="the vector queue's drain")
nudge_on_commit = nudger.on_commit
