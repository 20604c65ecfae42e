"""Advisory locks, with every lock id in one registry.

On PostgreSQL these are transaction-scoped advisory locks (``pg_advisory_xact_lock``), released at commit or
rollback. On SQLite every write transaction is ``BEGIN IMMEDIATE`` and so already holds the database's
single write lock, which serialises writers; the functions do nothing there.
"""

from django.db import connection


class LockId:
    """Namespaces (the first int of a two-int advisory lock). Never reuse a number."""

    USER_MEMORY = 7301  # one user's memory entries: cap checks and evictions
    DREAM_CYCLE = 7302  # one Dream cycle at a time
    CONVERSATION = 7303  # reserved: conversation sequence numbers use a row lock instead
    USER_RECALL = 7304  # one user's recalls: they queue here, not on the rows whose access they count


# The lock as an SQL expression with parameters (namespace, key), for statements that take it inline.
ADVISORY_XACT_LOCK = "pg_advisory_xact_lock(%s, hashtext(%s))"


def advisory_xact_lock(namespace: int, key: str) -> None:
    """Block until this transaction holds the lock for (namespace, key)."""
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {ADVISORY_XACT_LOCK}", [namespace, key])


def advisory_xact_try_lock(namespace: int, key: str) -> bool:
    """Take the lock for (namespace, key) if it is free; ``False`` if another transaction holds it."""
    if connection.vendor != "postgresql":
        return True
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_xact_lock(%s, hashtext(%s))", [namespace, key])
        return bool(cursor.fetchone()[0])
