"""Celery's broker: Redis where ``REDIS_URL`` names one (production), else the platform's own PostgreSQL
through kombu's SQLAlchemy transport (the embedded default: no service to install; docs/background.md).

Read by the settings, before Django is set up: nothing here imports Django.
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
