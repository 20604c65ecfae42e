"""Dream's services, the names its doors call (the ``dream`` commands, the admin, the task): a whole
cycle (:mod:`dream.cycle`: the lock, the run record, the passes of :data:`dream.passes.PASSES` in order), each
pass on its own (:mod:`dream.prune`, :mod:`dream.contradictions`, :mod:`dream.summarize`) and staff's approval
of a run's summaries.

Dream consolidates (seed 002): stale pruning, contradiction detection and summaries. Every pass is set-based
SQL committed in bounded batches (:mod:`dream.batches`), and writes entries only through usermemory's
services (:mod:`usermemory.maintenance`). Call these outside any transaction: each batch commits on its own.
"""

from dream.batches import DEFAULT_BATCH_SIZE, MAX_BATCH_SIZE, Batching
from dream.contradictions import ContradictionResult, dream_detect_contradictions
from dream.cycle import CYCLE_LOCK_KEY, ProgressCallback, dream_run_cycle
from dream.prune import PruneResult, dream_prune_stale, dream_prune_turn_counters
from dream.summarize import approve_run

__all__ = [
    "CYCLE_LOCK_KEY",
    "DEFAULT_BATCH_SIZE",
    "MAX_BATCH_SIZE",
    "Batching",
    "ContradictionResult",
    "ProgressCallback",
    "PruneResult",
    "approve_run",
    "dream_detect_contradictions",
    "dream_prune_stale",
    "dream_prune_turn_counters",
    "dream_run_cycle",
]
