"""System checks for configuration that is wrong but would otherwise fail late."""

import re
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.checks import CheckMessage, Error, Tags, Warning, register
from django.db import DEFAULT_DB_ALIAS
from django.db import Error as DatabaseError

from memoryplatform import relevance, store
from memoryplatform.embedded_db.server import EmbeddedServerError
from memoryplatform.embeddings import EmbedderError, build_embedder
from memoryplatform.rerank import RerankerError, build_reranker

MIN_SERVER_VERSION_NUM = 150000  # PostgreSQL 15
MIN_PGVECTOR = (0, 7, 0)  # halfvec, the type of the vector tables (usermemory 0020, conversations 0005)
DATABASE_URL_SCHEMES = ("postgres", "postgresql")
EMBEDDED_HINT = "or unset DATABASE_URL to use the embedded PostgreSQL (with pgvector) in DATA_DIR"


@register(Tags.security, deploy=True)
def check_metrics_exposure(app_configs: Any, **kwargs: Any) -> list[Warning]:
    if not settings.METRICS_TOKEN and any(
        ip not in {"127.0.0.1", "::1"} for ip in settings.METRICS_ALLOWED_IPS
    ):
        return [
            Warning(
                "/metrics is open to non-loopback addresses without a METRICS_TOKEN.",
                hint="Set METRICS_TOKEN and have Prometheus send it as a bearer token.",
                id="memoryplatform.W001",
            )
        ]
    return []


@register(Tags.security, deploy=True)
def check_public_id_key(app_configs: Any, **kwargs: Any) -> list[Warning]:
    """Public ids are keyed by PUBLIC_ID_KEY, or by SECRET_KEY when it is unset: then rotating SECRET_KEY
    (a routine step after a leak) would change every public id that clients hold."""
    if not settings.PUBLIC_ID_KEY and not settings.DEBUG:
        return [
            Warning(
                "PUBLIC_ID_KEY is not set: public ids are keyed by SECRET_KEY, and change with it.",
                hint="Set PUBLIC_ID_KEY to a random value, once, and keep it (.env.example).",
                id="memoryplatform.W002",
            )
        ]
    return []


@register(Tags.security, deploy=True)
def check_legacy_ids(app_configs: Any, **kwargs: Any) -> list[Warning]:
    """Legacy ids (the row numbers doors showed before public ids) are refused unless a deployment turns them
    on for clients that still hold them; while on, a caller holding one can probe the ids next to it."""
    if settings.PUBLIC_IDS_ACCEPT_LEGACY:
        return [
            Warning(
                "PUBLIC_IDS_ACCEPT_LEGACY is on: an agent holding a legacy id can probe the ids next to it "
                "and count the rows other agents wrote between them.",
                hint="Set PUBLIC_IDS_ACCEPT_LEGACY=false once clients hold public ids only (the default).",
                id="memoryplatform.W004",
            )
        ]
    return []


@register()
def check_embeddings(app_configs: Any, **kwargs: Any) -> list[Error]:
    """The EMBEDDINGS_* settings describe an embedder (provider, model, URL); it is not called."""
    try:
        build_embedder()
    except EmbedderError as exc:
        return [
            Error(
                str(exc),
                hint="See the EMBEDDINGS_* and MAX_QUERY_TOKENS lines of .env.example.",
                id="memoryplatform.E010",
            )
        ]
    return []


@register()
def check_reranker(app_configs: Any, **kwargs: Any) -> list[CheckMessage]:
    """The RERANK_* settings describe a reranker (building one loads nothing and calls nothing), and the
    embedder's scores are calibrated (memoryplatform/relevance.py), or say they are not."""
    messages: list[CheckMessage] = []
    try:
        build_reranker()
    except RerankerError as exc:
        messages.append(
            Error(str(exc), hint="See the RERANK_* lines of .env.example.", id="memoryplatform.E011")
        )
    try:
        configured = relevance.configured_calibration()
    except (ValueError, KeyError, TypeError) as exc:
        messages.append(
            Error(
                f"SEARCH_CALIBRATION is not a JSON object of the calibration's weights: {exc}",
                hint="Run python -m bench.calibrate and paste its object.",
                id="memoryplatform.E012",
            )
        )
        return messages
    try:
        embedder = build_embedder()
    except EmbedderError:
        return messages  # memoryplatform.E010 says why
    model = embedder.model_id if embedder else ""
    if model and configured is None and not relevance.is_calibrated(model):
        messages.append(
            Warning(
                f"The scores of embedder {model!r} are not calibrated: minScore means less than it says.",
                hint="Run python -m bench.calibrate and set SEARCH_CALIBRATION to its object.",
                id="memoryplatform.W003",
            )
        )
    return messages


@register()
def check_database_url(app_configs: Any, **kwargs: Any) -> list[Error]:
    """DATABASE_URL names PostgreSQL (or is unset: the embedded server). Every command runs it: it connects
    to nothing."""
    url: str = settings.DATABASE_URL
    scheme = urlsplit(url).scheme if url else ""
    if not url or scheme in DATABASE_URL_SCHEMES:
        return []
    return [
        Error(
            "DATABASE_URL must be a postgres:// or postgresql:// URL, "
            + (f"not a {scheme}:// one." if scheme else "and it has no scheme."),
            hint=f"Point DATABASE_URL at PostgreSQL 15 or later with pgvector, {EMBEDDED_HINT}.",
            id="memoryplatform.E001",
        )
    ]


def _version_tuple(version: str) -> tuple[int, ...]:
    """``"0.8.6"`` -> ``(0, 8, 6)``; ``"0.7.0-dev"`` -> ``(0, 7, 0)``."""
    return tuple(int(n) for n in re.findall(r"\d+", version)[:3])


def pgvector_problem(*, server: str, available: str | None, installed: str | None) -> Error | None:
    """What is wrong with pgvector on the PostgreSQL ``server`` (its version), given the version ``CREATE
    EXTENSION vector`` would install (``None``: the server has none) and the version installed in this
    database (``None``: not created yet)."""
    minimum = ".".join(map(str, MIN_PGVECTOR))
    if available is None and installed is None:
        return Error(
            f"The PostgreSQL {server} server has no 'vector' extension available (pg_available_extensions).",
            hint="Install pgvector on the server (e.g. the postgresql-NN-pgvector package, or an image "
            f"with pgvector such as pgvector/pgvector), {EMBEDDED_HINT}.",
            id="memoryplatform.E003",
        )
    version = installed or available or ""
    if _version_tuple(version) >= MIN_PGVECTOR:
        return None
    updatable = installed is not None and available is not None and _version_tuple(available) >= MIN_PGVECTOR
    where = "installed in this database" if installed else f"the PostgreSQL {server} server's"
    return Error(
        f"pgvector {version} is {where}; memoryplatform stores vectors as halfvec, which needs pgvector "
        f"{minimum} or later.",
        hint=f"Run ALTER EXTENSION vector UPDATE (the server has {available})."
        if updatable
        else f"Upgrade pgvector on the server to {minimum} or later, {EMBEDDED_HINT}.",
        id="memoryplatform.E013",
    )


def server_problems(
    *,
    version_num: int,
    version: str,
    vector_available: str | None,
    vector_installed: str | None = None,
    unknown_search_language: str | None = None,
) -> list[Error]:
    """What is wrong with a server of this version with pgvector at these versions (available: what
    ``CREATE EXTENSION`` would install; installed: in this database), whose text search configurations lack
    ``unknown_search_language`` when that is given (a pure function of the facts, so every branch is testable
    without such a server)."""
    problems = []
    if unknown_search_language:
        problems.append(
            Error(
                f"SEARCH_LANGUAGE is '{unknown_search_language}', which is not a text search "
                "configuration of this PostgreSQL server (pg_ts_config).",
                hint="Use memory_simple (the default: words as written, English stop words dropped), "
                "simple, or a language the server has, such as english or german "
                "(SELECT cfgname FROM pg_ts_config).",
                id="memoryplatform.E005",
            )
        )
    if version_num < MIN_SERVER_VERSION_NUM:
        problems.append(
            Error(
                f"The database server is PostgreSQL {version}; memoryplatform needs PostgreSQL 15 or later.",
                hint=f"Upgrade the server, {EMBEDDED_HINT}.",
                id="memoryplatform.E002",
            )
        )
    vector = pgvector_problem(server=version, available=vector_available, installed=vector_installed)
    if vector is not None:
        problems.append(vector)
    return problems


@register(Tags.database)
def check_database(
    app_configs: Any, databases: Sequence[str] | None = None, **kwargs: Any
) -> list[CheckMessage]:
    """The database is PostgreSQL 15 or later with ``vector`` 0.7.0 or later available. Runs on ``migrate``,
    ``check --database default`` and at ``serve``'s start (it connects, so not on every command)."""
    if not databases or DEFAULT_DB_ALIAS not in databases:
        return []
    if check_database_url(app_configs):
        return []  # the URL's own check says what is wrong; there is no server to ask
    try:
        facts = store.server_facts(search_language=settings.SEARCH_LANGUAGE)
    except (DatabaseError, EmbeddedServerError) as exc:  # no server, or the embedded one could not start
        where = "the embedded PostgreSQL" if not settings.DATABASE_URL else "the server DATABASE_URL names"
        return [
            Error(
                f"Cannot reach the database ({where}): {str(exc).strip() or type(exc).__name__}",
                hint="Check that the server runs and DATABASE_URL's host, port, user, password and database "
                f"name, {EMBEDDED_HINT}.",
                id="memoryplatform.E004",
            )
        ]
    # The default configuration comes with a migration (store.STORED_SEARCH_CONFIG): not missing before it.
    known = facts.search_language_known or settings.SEARCH_LANGUAGE == store.STORED_SEARCH_CONFIG
    return list(
        server_problems(
            version_num=facts.version_num,
            version=facts.version,
            vector_available=facts.vector_available,
            vector_installed=facts.vector_installed,
            unknown_search_language=None if known else settings.SEARCH_LANGUAGE,
        )
    )


POOLERS = ("pgbouncer",)


@register()
def check_pooler(app_configs: Any, **kwargs: Any) -> list[Error]:
    """What a transaction-pooling PgBouncer (``DATABASE_POOLER``) needs: no prepared statements (PgBouncer
    before 1.21 sends a statement prepared on one server session to another), and a direct
    ``DATABASE_LISTEN_URL`` for the key cache's notifications. Connects to nothing."""
    pooler: str = settings.DATABASE_POOLER
    listen_url: str = settings.DATABASE_LISTEN_URL
    problems = []
    if listen_url and urlsplit(listen_url).scheme not in DATABASE_URL_SCHEMES:
        problems.append(
            Error(
                "DATABASE_LISTEN_URL must be a postgres:// or postgresql:// URL.",
                hint="Point it at PostgreSQL itself (not at the pooler), or unset it.",
                id="memoryplatform.E023",
            )
        )
    if not pooler:
        return problems
    if pooler not in POOLERS:
        return [
            *problems,
            Error(
                f"DATABASE_POOLER must be one of {', '.join(POOLERS)} or empty, not {pooler!r}.",
                hint="Set it to pgbouncer for a PgBouncer in transaction mode; leave it empty otherwise.",
                id="memoryplatform.E022",
            ),
        ]
    if settings.PREPARED_STATEMENTS:
        problems.append(
            Error(
                "PREPARED_STATEMENTS is on behind a transaction-pooling PgBouncer (DATABASE_POOLER): a "
                "statement prepared on one server session would run on another ('prepared statement does "
                "not exist').",
                hint="Set PREPARED_STATEMENTS=false. With PgBouncer 1.21 or later and "
                "max_prepared_statements set, they work: then silence this check (SILENCED_SYSTEM_CHECKS).",
                id="memoryplatform.E020",
            )
        )
    if settings.API_KEY_CACHE and not listen_url:
        problems.append(
            Error(
                "API_KEY_CACHE is on behind a transaction-pooling PgBouncer without DATABASE_LISTEN_URL: the "
                "cache's LISTEN would go through the pool, and revoked keys could keep working.",
                hint="Set DATABASE_LISTEN_URL to a postgres:// URL of the same database straight to "
                "PostgreSQL (past the pooler), or set API_KEY_CACHE=false.",
                id="memoryplatform.E021",
            )
        )
    return problems
