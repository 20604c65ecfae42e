"""Celery's broker: Redis where ``REDIS_URL`` names one (production), else the platform's own PostgreSQL
through kombu's SQLAlchemy transport (the embedded default: no service to install; docs/background.md).

Read by the settings, before Django is set up: nothing here imports Django at the module's level.
"""

from typing import Any
from urllib.parse import quote, urlencode, urlsplit, urlunsplit

SQLA_SCHEME = "sqla+postgresql+psycopg"


def broker_url(*, redis_url: str, database_url: str, database: dict[str, Any]) -> str:
    """``redis_url`` when set; else a ``sqla+postgresql+psycopg://`` URL of the same PostgreSQL:
    ``database_url`` (a ``postgres://`` URL, past any pooler) when given, else the Django ``database`` entry
    (the embedded server, whose host is its socket directory)."""
    if redis_url:
        return redis_url
    if database_url:
        parts = urlsplit(database_url)
        return urlunsplit((SQLA_SCHEME, parts.netloc, parts.path, parts.query, ""))
    user = quote(str(database.get("USER") or ""), safe="")
    password = str(database.get("PASSWORD") or "")
    credentials = f"{user}:{quote(password, safe='')}" if password else user
    host, port = str(database.get("HOST") or ""), str(database.get("PORT") or "")
    name = quote(str(database.get("NAME") or ""), safe="")
    if host.startswith("/"):  # a Unix socket directory: libpq's host parameter
        query = urlencode({"host": host, **({"port": port} if port else {})})
        return f"{SQLA_SCHEME}://{credentials}@/{name}?{query}"
    netloc = f"{credentials}@{host}" + (f":{port}" if port else "")
    return f"{SQLA_SCHEME}://{netloc}/{name}"


def broker_kind(url: str) -> str:
    """``redis``, ``postgresql`` or the URL's scheme, for the logs and /metrics (never the URL: it may hold a
    password)."""
    scheme = url.split("://", 1)[0]
    if scheme.startswith(("redis", "rediss")):
        return "redis"
    if scheme.startswith("sqla+postgresql"):
        return "postgresql"
    return scheme


def embedded_broker_up() -> None:
    """Start (or join, for this process's life) the embedded PostgreSQL when it is the broker, before kombu
    connects to it: the worker, beat and every process that enqueues a task (config/celery.py's signals).
    Cheap after the first call (memoryplatform/embedded_db/server.py)."""
    from pathlib import Path

    from django.conf import settings

    embedded = settings.DATABASES["default"]["ENGINE"] == "memoryplatform.embedded_db"
    if embedded and broker_kind(settings.CELERY_BROKER_URL) == "postgresql":
        from memoryplatform.embedded_db import server

        server.ensure_running(Path(settings.DATA_DIR))


DELIVERED_KEPT_SECONDS = 3600
"""How long the PostgreSQL broker's delivered messages are kept before :func:`broker_prune_delivered`."""


def broker_prune_delivered() -> int:
    """kombu's SQLAlchemy transport keeps every message it delivered (``visible`` false) for good: delete
    those older than :data:`DELIVERED_KEPT_SECONDS` (beat's ``broker-prune``, hourly). Nothing to do on
    Redis."""
    from django.conf import settings

    from memoryplatform import store

    if broker_kind(settings.CELERY_BROKER_URL) != "postgresql":
        return 0
    return store.broker_prune_delivered(older_than_seconds=DELIVERED_KEPT_SECONDS)


def broker_queue_depths(queues: tuple[str, ...]) -> dict[str, int]:
    """Messages waiting in each queue: on PostgreSQL read from the transport's tables (one statement, on
    Django's connection), on Redis from the broker (kombu's passive declare, one try: a queue it does not
    know holds nothing, as Redis keeps no empty list)."""
    from django.conf import settings
    from kombu.exceptions import ChannelError

    if broker_kind(settings.CELERY_BROKER_URL) == "postgresql":
        from memoryplatform import store

        depths = store.broker_queue_depths()
        return {queue: depths.get(queue, 0) for queue in queues}
    from celery import current_app

    found = {}
    with current_app.connection_for_read() as connection:
        connection.ensure_connection(max_retries=0)  # a broker that is down: one try, not a scrape's wait
        channel = connection.default_channel
        for queue in queues:
            try:  # kombu's channels declare; celery-types' StdChannel does not say so
                declared = channel.queue_declare(queue=queue, passive=True)  # type: ignore[attr-defined]
            except ChannelError:  # no such queue: no message waits in it
                found[queue] = 0
                continue
            found[queue] = int(declared.message_count)
    return found


def enqueue_once(task: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None) -> None:
    """Send ``task`` with one try at the broker, on the caller's thread: a broker that does not answer raises
    (kombu's ``OperationalError``) at once.

    For the nudges a commit sends (:class:`memoryplatform.nudge.Nudger`) and staff's buttons (webhooks' "send
    again", Dream's "Run Dream now"). Left to itself, kombu's pooled producer retries a connection that is
    down for ``broker_connection_timeout`` (about 6 s, three connects): a write would wait that long for its
    nudge, while beat's sweep sends the same task anyway. Here the pooled producer's connection is made with
    one try when it is not made yet; a made one is used as it is."""
    with task.app.producer_or_acquire() as producer:
        producer.connection.ensure_connection(max_retries=0)
        task.apply_async(args, kwargs, retry=False, producer=producer)
