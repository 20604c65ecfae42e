"""A streaming replica for the heavy reads, chosen by door (``DATABASE_REPLICA_URL``, issue 49).

The same tables are read by the agents' doors, which must see their own writes, and by doors that read many
rows and need no read-your-write. So reads are routed by door, not by model: a door marked
:func:`replica_door` (the GDPR export, staff search across users, the tool-call log, the Overview), every list
page of the admin and Dream's run reports, and Dream's dry runs (:func:`reads_from_replica` around the
cycle) read from the ``replica`` alias; everything else reads from the primary, and every write goes to the
primary whatever the door (:class:`DoorRouter`).

Before a routed door reads, the replica's lag decides (:func:`replica_state`, measured at most once a
second per process, so a routed read costs no extra round trip most of the time): above ``REPLICA_MAX_LAG``
seconds, when the replica cannot be reached, or while it has not replayed the last GDPR erasure
(:func:`erasure_committed`), the door reads from the primary instead and its response says so in
``X-Read-From``. The measure runs on a thread of its own, and a request waits for it at most
``PROBE_TIMEOUT``: a replica that hangs (stopped, its host frozen) is found unreachable and skipped until it
is probed again, and no door waits on another's probe. A replica that fails in the middle of a request is
probed again, and the request runs once more on the primary: a routed read never becomes an error because of
the replica.

With ``DATABASE_REPLICA_URL`` unset there is no alias, no router and no middleware: nothing here runs.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections, transaction
from django.http import HttpRequest, HttpResponse
from prometheus_client import Counter, Gauge

logger = logging.getLogger(__name__)

REPLICA = "replica"
HEADER = "X-Read-From"
CHECK_SECONDS = 1.0  # a measured lag is used this long
DOWN_SECONDS = (
    5.0  # an unreachable replica is tried again after this long (each try may wait CONNECT_TIMEOUT)
)
CONNECT_TIMEOUT = 2  # seconds (libpq's connect_timeout): a replica that does not answer is soon given up
PROBE_TIMEOUT = CONNECT_TIMEOUT + 1  # seconds a request waits for a measure of the replica
STATEMENT_TIMEOUT_MS = 30_000  # the replica's statement_timeout: a routed read slower reads the primary
READ_METHODS = ("GET", "HEAD")
# The admin's pages that read from the replica besides every list page: Dream's run reports.
ADMIN_REPORT_PAGES = frozenset({"dream_dreamrun_change"})
# Who is asking is always read from the primary, whatever the door: a session, a staff user and their
# permissions, an API key (its lookup is hand-written SQL on the primary's connection already; its models
# too). A sign-in or a revocation must hold at once, not a replica's lag later.
PRIMARY_APPS = frozenset({"auth", "sessions", "contenttypes", "apikeys"})

replica_lag = Gauge(
    "database_replica_lag_seconds",
    "How far the read replica's replay is behind (0: it has replayed all it received, or no replica is "
    "configured); -1 when it cannot be "
    "reached. Measured at most once a second, and at each scrape of /metrics.",
    multiprocess_mode="mostrecent",
)
replica_reads = Counter(
    "database_replica_reads_total",
    "Requests of the doors that read from the replica, by where they read (replica, or primary with the "
    "reason: lag, unreachable).",
    ["target"],
)

_route: ContextVar[str | None] = ContextVar("memoryplatform_read_route", default=None)


def replica_database(config: dict[str, Any], *, primary: dict[str, Any]) -> dict[str, Any]:
    """The Django DATABASES entry of the replica: the URL's, with the primary's connection reuse, a short
    connect timeout (a replica that does not answer sends the reads to the primary soon), a statement
    timeout (a read the replica holds up, waiting on its replay, fails there and runs again on the primary),
    and, in a test run, the primary's test database (the replica only reads what the primary holds)."""
    if config.get("ENGINE") != "django.db.backends.postgresql":
        raise ImproperlyConfigured("DATABASE_REPLICA_URL must be a postgres:// or postgresql:// URL.")
    options = {
        "connect_timeout": CONNECT_TIMEOUT,
        "options": f"-c statement_timeout={STATEMENT_TIMEOUT_MS}",
        **config.get("OPTIONS", {}),
    }
    entry = {
        **config,
        "OPTIONS": options,
        "CONN_MAX_AGE": primary.get("CONN_MAX_AGE", 0),
        "CONN_HEALTH_CHECKS": primary.get("CONN_HEALTH_CHECKS", False),
        "TEST": {"MIRROR": DEFAULT_DB_ALIAS},
    }
    if primary.get("DISABLE_SERVER_SIDE_CURSORS"):
        entry["DISABLE_SERVER_SIDE_CURSORS"] = True
    return entry


def configured() -> bool:
    return REPLICA in settings.DATABASES


# --- Lag ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReplicaState:
    reachable: bool
    lag: float | None  # seconds; None: unknown (unreachable, or nothing replayed yet while behind)
    replayed_at: datetime | None  # the commit time of the last transaction the replica replayed
    measured: float  # time.monotonic() of the measure
    error: str = ""  # why it cannot be reached: for the log, never for /readyz
    replayed_lsn: int | None = None  # how far it has replayed (bytes of WAL); None: it is no standby

    def usable(self) -> bool:
        return self.reachable and self.lag is not None and self.lag <= settings.REPLICA_MAX_LAG

    def reason(self) -> str:
        """Why the routed reads go to the primary ('' when they go to the replica)."""
        if self.usable():
            return ""
        return "unreachable" if not self.reachable else "lag"


_state: ReplicaState | None = None
_state_lock = threading.Lock()  # held to read and replace the state and the probe, never while measuring
_caught_up_at: float | None = None  # time.monotonic() of the last measure that found the replica caught up
_probe: Future[ReplicaState] | None = None  # the measure under way, on the probe's thread
_probe_started = 0.0


def _new_prober() -> None:
    """This process's probe thread. A forked child gets its own (the parent's thread does not exist there)."""
    global _prober, _probe
    _prober = ThreadPoolExecutor(max_workers=1, thread_name_prefix="replica-probe")
    _probe = None


_prober: ThreadPoolExecutor
_new_prober()
os.register_at_fork(after_in_child=_new_prober)


def _measure() -> ReplicaState:
    """One measure, on the probe's thread (its own connection to the replica). ``now() -
    pg_last_xact_replay_timestamp()`` over-states the lag after an idle spell: the
    first commit after ten idle seconds, received and not yet replayed, reads as ten seconds behind. What the
    replica has not replayed arrived after the last measure that found it caught up, so the lag is at most
    the time since then: the smaller of the two (close to the truth while routed reads measure every
    second; after a long quiet, the replay time's bound alone)."""
    global _caught_up_at
    from memoryplatform import store

    now = time.monotonic()
    try:
        status = store.replica_status(using=REPLICA)
    except DatabaseError as exc:
        with contextlib.suppress(DatabaseError):
            connections[REPLICA].close()  # a broken connection is opened anew next time
        logger.warning("The read replica cannot be reached: %s", exc)
        replica_lag.set(-1)
        return ReplicaState(reachable=False, lag=None, replayed_at=None, measured=now, error=str(exc)[:200])
    lag = status.lag_seconds
    if lag == 0.0:
        _caught_up_at = now
    elif _caught_up_at is not None:
        lag = min(lag, now - _caught_up_at) if lag is not None else now - _caught_up_at
    replica_lag.set(lag if lag is not None else -1)
    return ReplicaState(
        reachable=True,
        lag=lag,
        replayed_at=status.replayed_at,
        measured=now,
        replayed_lsn=status.replayed_lsn,
    )


def replica_state(*, fresh: bool = False) -> ReplicaState | None:
    """The replica's reachability and lag, measured at most every CHECK_SECONDS (DOWN_SECONDS while it
    cannot be reached) per process; ``fresh``: measured now. ``None`` without a replica.

    The measure runs on a thread of its own, and a caller waits for it at most PROBE_TIMEOUT seconds from its
    start: a replica that accepts connections and never answers (stopped, or its host hung) is then
    unreachable, and skipped until it is probed again. No lock is held while measuring, and one measure at a
    time is under way: while a hung one still is, past its PROBE_TIMEOUT, every caller is told at once that
    the replica cannot be reached."""
    global _state
    if not configured():
        return None
    state = _state
    if not fresh and state is not None and _current(state):
        return state
    probe, started = _probe_now()
    try:
        state = probe.result(timeout=max(0.0, started + PROBE_TIMEOUT - time.monotonic()))
    except TimeoutError:
        logger.warning("The read replica did not answer its probe within %s s", PROBE_TIMEOUT)
        replica_lag.set(-1)
        error = f"no answer within {PROBE_TIMEOUT} s"
        now = time.monotonic()
        state = ReplicaState(reachable=False, lag=None, replayed_at=None, measured=now, error=error)
    with _state_lock:
        if _state is None or state.measured >= _state.measured:
            _state = state
    return state


def _probe_now() -> tuple[Future[ReplicaState], float]:
    """The measure under way, or a new one when none is: with the time it started."""
    global _probe, _probe_started
    with _state_lock:
        if _probe is None or _probe.done():
            _probe, _probe_started = _prober.submit(_measure), time.monotonic()
        return _probe, _probe_started


def _current(state: ReplicaState) -> bool:
    return time.monotonic() - state.measured < (CHECK_SECONDS if state.reachable else DOWN_SECONDS)


# --- Routing --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReadRoute:
    """Where a door's reads went, and why: ``header`` is the value of ``X-Read-From``."""

    alias: str
    reason: str = ""  # "lag", "unreachable", "erasure" (not yet replayed) or "error" (failed on the replica)
    lag: float | None = None

    @property
    def on_replica(self) -> bool:
        return self.alias == REPLICA

    @property
    def header(self) -> str:
        if self.on_replica:
            return "replica"
        if self.reason == "lag" and self.lag is not None:
            return f"primary; reason=lag; lag={self.lag:.3f}"
        return f"primary; reason={self.reason}"


def _choose() -> ReadRoute:
    state = replica_state()
    if state is None:
        return ReadRoute(DEFAULT_DB_ALIAS)
    if not state.usable():
        return ReadRoute(DEFAULT_DB_ALIAS, reason=state.reason(), lag=state.lag)
    if _behind_erasure(state):
        return ReadRoute(DEFAULT_DB_ALIAS, reason="erasure", lag=state.lag)
    return ReadRoute(REPLICA, lag=state.lag)


def _behind_erasure(state: ReplicaState) -> bool:
    """Whether the replica, as last measured, may still hold a user the primary has erased: it had not
    replayed up to the last erasure's fence. A measure only understates the replay, so a replica found past
    the fence is past it. One small read of the primary per routed door."""
    from memoryplatform import store

    if state.replayed_lsn is None:  # no standby: nothing to replay
        return False
    fence = store.erasure_fence()
    return fence is not None and state.replayed_lsn < fence


def erasure_committed() -> None:
    """Call inside a GDPR erasure's transaction: once it commits, the routed doors read from the primary
    until the replica has replayed it (an erased user is not served from a lagging replica). Without a
    replica: nothing."""
    if not configured():
        return
    from memoryplatform import store

    transaction.on_commit(store.erasure_fence_raise, robust=True)


@contextlib.contextmanager
def _reading_from(route: ReadRoute) -> Iterator[ReadRoute]:
    token = _route.set(route.alias)
    try:
        yield route
    finally:
        _route.reset(token)


@contextlib.contextmanager
def reads_from_replica() -> Iterator[ReadRoute]:
    """The reads of the block go to the replica, unless it lags past REPLICA_MAX_LAG or cannot be reached
    (then the primary's, and the route says why). Writes always go to the primary. Without a replica: the
    primary, at no cost. Use it around reads that need no read-your-write only."""
    if not configured():
        yield ReadRoute(DEFAULT_DB_ALIAS)
        return
    route = _choose()
    replica_reads.labels(target="replica" if route.on_replica else f"primary:{route.reason}").inc()
    with _reading_from(route):
        yield route


def read_alias() -> str:
    """The alias the current door reads from (for hand-written statements, which Django's router never
    sees): the replica inside :func:`reads_from_replica` when it was chosen, else the primary."""
    return _route.get() or DEFAULT_DB_ALIAS


def replayed_at() -> datetime | None:
    """The commit time of the last transaction the replica had replayed, when the current door reads from
    it (measured now, on the replica); ``None`` when it reads from the primary."""
    if _route.get() != REPLICA:
        return None
    from memoryplatform import store

    return store.replica_status(using=REPLICA).replayed_at


class DoorRouter:
    """Django's database router: a read goes where the current door reads (:func:`read_alias`), but who is
    asking (:data:`PRIMARY_APPS`), every write and every migration go to the primary."""

    def db_for_read(self, model: type, **hints: Any) -> str:
        alias = _route.get()
        if alias is None or model._meta.app_label in PRIMARY_APPS:  # type: ignore[attr-defined]
            return DEFAULT_DB_ALIAS
        return alias

    def db_for_write(self, model: type, **hints: Any) -> str:
        return DEFAULT_DB_ALIAS

    def allow_relation(self, obj1: Any, obj2: Any, **hints: Any) -> bool:
        return True  # one database, two servers

    def allow_migrate(self, db: str, app_label: str, **hints: Any) -> bool:
        return db == DEFAULT_DB_ALIAS


# --- Doors ----------------------------------------------------------------------------------------------

D = TypeVar("D")


def replica_door(door: D) -> D:
    """Mark a view (a function, or an API view class) as a door whose reads (GET, HEAD) go to the replica."""
    door.reads_from_replica = True  # type: ignore[attr-defined]
    return door


def is_replica_door(request: HttpRequest, view: Callable[..., Any]) -> bool:
    if request.method not in READ_METHODS:
        return False
    if getattr(view, "reads_from_replica", False):
        return True
    if getattr(getattr(view, "view_class", None), "reads_from_replica", False):
        return True
    match = request.resolver_match
    if match is None or match.namespace != "admin" or not match.url_name:
        return False
    return match.url_name.endswith("_changelist") or match.url_name in ADMIN_REPORT_PAGES


class ReplicaDoorMiddleware:
    """Runs the replica's doors (:func:`is_replica_door`) with their reads on the replica, names where they
    read in ``X-Read-From``, and runs a request again on the primary if the replica failed under it. Last in
    MIDDLEWARE: it calls the view itself, so that the reads of a template rendered after the view (the
    admin's lists) happen on the same route."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_view(
        self, request: HttpRequest, view: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> HttpResponse | None:
        if not is_replica_door(request, view):
            return None
        with reads_from_replica() as route:
            response = _run(view, request, args, kwargs, fallible=route.on_replica)
        if response is None:  # the replica failed under the request: once more, on the primary
            route = ReadRoute(DEFAULT_DB_ALIAS, reason="unreachable" if not _replica_alive() else "error")
            replica_reads.labels(target=f"primary:{route.reason}").inc()
            with _reading_from(route):
                response = _run(view, request, args, kwargs, fallible=False)
            assert response is not None  # noqa: S101  (fallible=False never returns None)
        response[HEADER] = route.header
        return response


def _run(
    view: Callable[..., Any],
    request: HttpRequest,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    *,
    fallible: bool,
) -> HttpResponse | None:
    """The view's response, rendered; ``None`` when ``fallible`` and it failed on the replica: a database
    error, or a 5xx answer (the API's envelope of one). The replica may have gone away, or cancelled the
    statement for a conflict with its replay; a read-only door is then run again on the primary."""
    try:
        response = view(request, *args, **kwargs)
        render = getattr(response, "render", None)
        if callable(render):
            response = render() or response  # a TemplateResponse reads its rows while rendering
    except DatabaseError as exc:
        if not fallible:
            raise
        logger.warning("A read on the replica failed; reading from the primary: %s", exc)
        return None
    if fallible and response.status_code >= 500:
        logger.warning("A door answered %s on the replica; reading from the primary", response.status_code)
        return None
    return response


def _replica_alive() -> bool:
    state = replica_state(fresh=True)
    return state is not None and state.reachable


def readiness() -> dict[str, Any] | None:
    """What ``/readyz`` says of the replica (``None`` without one). A lagging or unreachable replica does
    not make the process unready: its doors read from the primary meanwhile."""
    state = replica_state()
    if state is None:
        return None
    return {
        "status": "ok" if state.usable() else ("unreachable" if not state.reachable else "lagging"),
        "lagSeconds": None if state.lag is None else round(state.lag, 3),
        "maxLagSeconds": settings.REPLICA_MAX_LAG,
        "replayedAt": state.replayed_at.isoformat() if state.replayed_at else None,
    }  # never the error: /readyz needs no key, and it names hosts and sockets (the log says it)
