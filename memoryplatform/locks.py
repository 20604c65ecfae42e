"""Advisory locks, with every lock id in one registry.

PostgreSQL advisory locks: transaction-scoped ones (``pg_advisory_xact_lock``), released at commit or
rollback, and, for work that spans many transactions (a Dream cycle), session ones, released explicitly or
when the session ends, so a process that dies cannot leave one behind. The statements are in
:mod:`memoryplatform.store`.
"""

from memoryplatform import store


class LockId:
    """Namespaces (the first int of a two-int advisory lock). Never reuse a number."""

    USER_MEMORY = 7301  # one user's memory entries: cap checks and evictions
    DREAM_CYCLE = 7302  # one Dream cycle at a time
    CONVERSATION = 7303  # reserved: conversation sequence numbers use a row lock instead
    USER_RECALL = 7304  # one user's recalls: they queue here, not on the rows whose access they count
    DREAM_RUN = 7305  # held by a Dream run (dry or not) while its process lives, keyed by the run's id
    EMBEDDINGS = 7306  # one re-embedding pass (the scheduled job, `embed --missing`) at a time, by table
    EXTRACTION = 7307  # one background extraction run at a time (its watermarks are compare-and-set anyway)
    LLM_BUDGET = 7308  # one agent's LLM budget: the check and the reservation of a call (activity.budget)
    WEBHOOK = 7309  # one webhook subscription's deliveries, keyed by its id: one at a time, in order


def advisory_xact_lock(namespace: int, key: str) -> None:
    """Block until this transaction holds the lock for (namespace, key)."""
    store.advisory_xact_lock(namespace=namespace, key=key)


def advisory_xact_try_lock(namespace: int, key: str) -> bool:
    """Take the lock for (namespace, key) if it is free; ``False`` if another transaction holds it."""
    return store.advisory_xact_try_lock(namespace=namespace, key=key)


def advisory_session_try_lock(namespace: int, key: str) -> bool:
    """Take the session lock for (namespace, key) if it is free; ``False`` if another session holds it.
    Held across transactions until :func:`advisory_session_unlock` or the connection's end."""
    return store.advisory_try_lock(namespace=namespace, key=key)


def advisory_session_unlock(namespace: int, key: str) -> bool:
    """Release a session lock this connection holds."""
    return store.advisory_unlock(namespace=namespace, key=key)
