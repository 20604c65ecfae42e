"""Looked-up keys kept in the process between requests, so most requests skip the key lookup.

The lookup reads a key, its agent and the agent's memory policy in one statement: on an upsert it was one of
five round trips to the database, and about an eighth of the worker's CPU (``bench/RESULTS.md``). This keeps
what it read, the key built with its agent and policy (building them was 5-9 % of a hot request's CPU), and
stays true by listening:

- Every change to a key, an agent or a memory policy notifies channel :data:`CHANNEL`. Triggers do it
  (migrations ``apikeys.0002`` and ``usermemory.0007``), whoever writes: the admin, the API, a shell, plain
  SQL. Recording a key's or an agent's last use is not a change.
- Without ``DATABASE_LISTEN_URL``, every connection LISTENs from the moment it opens, and a new connection
  empties the cache: it could not hear what changed before it opened.
- Before a request reads the cache, its connection takes the notifications already received, without waiting.
  Any notification on the channel empties the cache. The server sends them as the change commits, so a worker
  hears of it well before a client can send a request that follows it.
- A change made through this process's models also empties the cache at once, and again when it commits.

Behind a transaction-pooling PgBouncer, a LISTEN sent through the pool is heard by nobody in particular, so
with ``DATABASE_LISTEN_URL`` set (a direct URL to PostgreSQL, past the pooler) the pooled connections do not
LISTEN. Instead each process keeps one listening connection of its own, held by a thread
(:class:`memoryplatform.listen.Listener`), and the guarantee stays the one above, for the same reason:

- Before a request reads the cache, it takes, without waiting, the notifications already received on that
  connection (under the listener's lock, so a drain the thread has begun finishes first). Waking a thread
  would not be enough: between the thread's wake-up and its emptying the cache, a request could read it.
  Polling a socket costs a system call, not a round trip.
- PostgreSQL signals every listening session as the change commits, before the writer hears that it
  committed; the listening session then writes the notification to its socket. What remains is that write's
  latency (a process to schedule: 94-99 % of notifications are there before the writer hears its commit,
  p99 36 µs, a rare 5 ms on a loaded machine; ``bench/notify_latency.py``) against the writer's response
  reaching a client and that client's next request reaching this process (an HTTP round trip at the least).
  tests/memoryplatform/test_pgbouncer.py sends that next request at once. Closing even that window would
  take a round trip on every request, which is what the cache saves.
- The thread drains the socket when it is idle (PostgreSQL keeps a notification queue until every listener
  has read it) and sends a heartbeat, so a dead connection is noticed. While the connection is not open
  (not yet, or lost) the cache is empty and not used: every request looks its key up. A reopened connection
  empties it again, since what changed in between was not heard. A connection that dies without a word
  (a network cut) is noticed by the heartbeat (10 s) or TCP keepalives; until then, so is nothing else.

Only committed rows are kept: the cache is read and filled only outside a transaction. A key that is not found
is never kept, and the presented key's digest is checked on every request. The cache is off with
``API_KEY_CACHE=false``.

Notifications are read with psycopg's public ``Connection.notifies()`` (psycopg 3.3 keeps those that arrive
while a query runs, for the next call).
"""

import threading
import weakref
from typing import Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connection, transaction
from django.db.backends.signals import connection_created
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver
from prometheus_client import Counter

from memoryplatform.listen import Listener

CHANNEL = "memoryplatform_auth"

# What apikeys.services keeps of a key: the ApiKey built from its lookup row, with its agent and the agent's
# policy loaded. Requests share it and only read it (apikeys.services.apikey_authenticate says how).
Row = Any


class KeyRows:
    """Looked-up keys by key prefix. One is kept only if nothing emptied the cache since its read began."""

    def __init__(self, max_entries: int) -> None:
        self.max_entries = max_entries
        self.generation = 0
        self._rows: dict[str, Row] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._rows)

    def get(self, prefix: str) -> Row | None:
        return self._rows.get(prefix)

    def put(self, prefix: str, row: Row, *, generation: int) -> None:
        """Keep ``row``, read after :attr:`generation` was ``generation``; a cache emptied since drops it."""
        with self._lock:
            if generation != self.generation:
                return
            if len(self._rows) >= self.max_entries:
                self._rows.clear()
            self._rows[prefix] = row

    def forget(self, prefix: str) -> None:
        with self._lock:
            self._rows.pop(prefix, None)

    def clear(self) -> None:
        with self._lock:
            self.generation += 1
            self._rows = {}


lookups = Counter(
    "api_key_lookups",
    "Presented API keys, by where their row came from: cache (kept in the process) or database (looked up).",
    ["source"],
)
ROWS = KeyRows(max_entries=settings.API_KEY_CACHE_SIZE)
_LISTENING: "weakref.WeakSet[Any]" = weakref.WeakSet()  # psycopg connections that LISTEN on the channel


def hear(notify: Any) -> None:
    """A notification on the listening connection: one on :data:`CHANNEL` empties the cache."""
    if notify.channel == CHANNEL:
        ROWS.clear()


LISTENER = Listener(
    [CHANNEL], on_notify=hear, on_reset=ROWS.clear, name="memoryplatform-keycache"
)  # used with DATABASE_LISTEN_URL only


def enabled() -> bool:
    return bool(settings.API_KEY_CACHE)


def listens_apart() -> bool:
    """Whether the notifications come on the process's own direct connection (``DATABASE_LISTEN_URL``)
    rather than on each pooled Django connection."""
    return bool(settings.DATABASE_LISTEN_URL)


def usable() -> bool:
    """Whether this request may read and fill the cache: on, outside a transaction, and every notification
    already received applied (on this thread's connection, or on the process's listening connection)."""
    if not enabled() or connection.in_atomic_block:
        return False
    if listens_apart():
        LISTENER.start()
        return LISTENER.poll()
    connection.ensure_connection()
    return _apply_notifications(connection.connection)


def _apply_notifications(conn: Any) -> bool:
    """Take what the server already sent on this (idle) connection, without waiting (psycopg's public
    ``Connection.notifies(timeout=0)``: first the notifications it kept while running queries, then one
    poll of the socket). ``False`` when the connection is not listening or is broken."""
    import psycopg

    if conn not in _LISTENING:
        return False
    try:
        for notify in conn.notifies(timeout=0):
            if notify.channel == CHANNEL:
                ROWS.clear()
    except psycopg.Error:  # a broken connection: the lookup will meet it, and Django will replace it
        ROWS.clear()
        return False
    return True


def forget_all() -> None:
    """This process is changing a key, an agent or a policy: empty the cache now and when the change commits
    (until then, another thread could keep the row as it was)."""
    ROWS.clear()
    transaction.on_commit(ROWS.clear)


@receiver(post_save, sender="apikeys.ApiKey", dispatch_uid="apikeys.keycache.key_saved")
@receiver(post_delete, sender="apikeys.ApiKey", dispatch_uid="apikeys.keycache.key_deleted")
@receiver(post_save, sender="apikeys.Agent", dispatch_uid="apikeys.keycache.agent_saved")
@receiver(post_delete, sender="apikeys.Agent", dispatch_uid="apikeys.keycache.agent_deleted")
@receiver(post_save, sender="usermemory.AgentMemoryPolicy", dispatch_uid="apikeys.keycache.policy_saved")
@receiver(post_delete, sender="usermemory.AgentMemoryPolicy", dispatch_uid="apikeys.keycache.policy_deleted")
def _changed(sender: Any, **kwargs: Any) -> None:
    if enabled():
        forget_all()


@receiver(connection_created, dispatch_uid="apikeys.keycache.listen")
def listen(sender: Any, connection: Any, **kwargs: Any) -> None:
    """A new connection: empty the cache, LISTEN and hear notifications. Django opens connections in
    autocommit, so LISTEN holds at once; a connection opened otherwise never reads the cache."""
    if connection.alias != DEFAULT_DB_ALIAS or not settings.API_KEY_CACHE or listens_apart():
        return
    ROWS.clear()
    conn = connection.connection
    if not conn.autocommit:
        return
    conn.execute(f"LISTEN {CHANNEL}")
    _LISTENING.add(conn)
