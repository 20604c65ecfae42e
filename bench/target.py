"""The database a bench command works on: the embedded PostgreSQL of DATA_DIR by default, or a DATABASE_URL.

- No ``DATABASE_URL`` (and no ``--db-url``): a database named ``bench`` (the smoke: ``bench_smoke``) in the
  embedded server whose data lives in ``DATA_DIR`` (default ``var/``, as the platform's settings read it). The
  bench process becomes a user of that server (``ensure_running``), so the server stays up while it runs and
  stops by itself after the last user exits. The processes the bench starts (``manage.py serve``) are given a
  ``postgres://`` URL whose host is the server's socket directory.
- ``DATABASE_URL=postgres://...``: that database (a dedicated one: it is filled, and ``--reset`` drops it).
"""

import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, urlparse

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

ROOT = Path(__file__).resolve().parent.parent
BENCH_DB = "bench"
PROTECTED = frozenset({"postgres", "template0", "template1", "memoryplatform"})


@dataclass(frozen=True)
class Target:
    name: str  # the database's name
    url: str  # DATABASE_URL for Django, in this process and in the processes the bench starts
    conninfo: str  # for psycopg
    admin_conninfo: str  # the same server, database ``postgres``: to create and drop ``name``
    embedded: bool


def data_dir() -> Path:
    """DATA_DIR as the platform's settings read it: relative paths are under the checkout."""
    path = Path(os.environ.get("DATA_DIR", "var"))
    return path if path.is_absolute() else ROOT / path


def resolve(db_url: str, *, name: str | None = None) -> Target:
    """The target of ``db_url`` (empty: the embedded server); ``name`` replaces the database's name."""
    if not db_url:
        from memoryplatform.embedded_db.server import connection_settings, ensure_running

        directory = data_dir()
        ensure_running(directory)  # this process is a user of the server for its whole life
        settings = connection_settings(directory)
        dbname = name or BENCH_DB
        user, host, port = settings["USER"], settings["HOST"], settings["PORT"]
        return Target(
            name=dbname,
            url=f"postgres://{quote(user, safe='')}@/{dbname}?host={quote(host, safe='')}&port={port}",
            conninfo=make_conninfo(dbname=dbname, user=user, host=host, port=port),
            admin_conninfo=make_conninfo(dbname="postgres", user=user, host=host, port=port),
            embedded=True,
        )
    parsed = urlparse(db_url)
    if parsed.scheme not in {"postgres", "postgresql"}:
        raise SystemExit(
            f"DATABASE_URL must name a PostgreSQL database (postgres://...), not {parsed.scheme}://"
        )
    if name:
        parsed = parsed._replace(path=f"/{name}")
    url = parsed.geturl()
    return Target(
        name=parsed.path.lstrip("/"),
        url=url,
        conninfo=url,
        admin_conninfo=parsed._replace(path="/postgres").geturl(),
        embedded=False,
    )


def exists(target: Target) -> bool:
    with psycopg.connect(target.admin_conninfo, autocommit=True) as conn:
        found = conn.execute("SELECT 1 FROM pg_database WHERE datname = %(name)s", {"name": target.name})
        return found.fetchone() is not None


def create(target: Target, *, reset: bool) -> None:
    """Create the database if it is missing; with ``reset``, drop it first."""
    if reset:
        drop(target)
    if exists(target):
        return
    with psycopg.connect(target.admin_conninfo, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(target.name)))


def drop(target: Target) -> None:
    if target.name in PROTECTED:
        raise SystemExit(f"refusing to drop the {target.name!r} database")
    with psycopg.connect(target.admin_conninfo, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(target.name)))


def django_setup(target: Target) -> None:
    """Django on the target: settings take DATABASE_URL (a postgres:// URL, also for the embedded server)."""
    os.environ["DATABASE_URL"] = target.url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("DEBUG", "false")
    import django

    django.setup()
