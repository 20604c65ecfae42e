"""Operational endpoints: liveness, readiness and the guarded Prometheus scrape."""

import hmac
import logging
from collections.abc import Callable
from functools import wraps

from django.conf import settings
from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django_prometheus.exports import ExportToDjangoView

from memoryplatform import replica, store
from memoryplatform.api.errors import envelope
from memoryplatform.embeddings.consumer import report_backlog
from memoryplatform.taskmetrics import report_background

logger = logging.getLogger(__name__)

View = Callable[[HttpRequest], HttpResponse]
READ_METHODS = ("GET", "HEAD")


def reads_only(view: View) -> View:
    """GET and HEAD, which a load balancer's probe may send either of; any other method is a 405 in the
    error envelope with ``Allow``, as the API's doors answer (Django's ``require_GET`` answers an empty HTML
    405, and refuses HEAD). Exempt from CSRF, which would otherwise answer a POST without a key first, with
    its HTML page: these views change nothing."""

    @csrf_exempt
    @wraps(view)
    def only_reads(request: HttpRequest) -> HttpResponse:
        if request.method not in READ_METHODS:
            refusal = envelope(f'Method "{request.method}" not allowed.', "method_not_allowed")
            return JsonResponse(refusal, status=405, headers={"Allow": ", ".join(READ_METHODS)})
        return view(request)

    return only_reads


@reads_only
def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness: the process answers. Touches no database."""
    return JsonResponse({"status": "ok"})


def _check_database() -> str | None:
    try:
        store.ping()
    except Exception as exc:  # any failure means "not ready"
        return f"{type(exc).__name__}: {exc}"
    return None


@reads_only
def readyz(request: HttpRequest) -> JsonResponse:
    """Readiness: the database answers."""
    checks = {"database": _check_database()}
    failed = {name: error for name, error in checks.items() if error}
    # The replica's lag and state: reported, never failing readiness (its doors read from the primary).
    replica_report = replica.readiness()
    extra = {"replica": replica_report} if replica_report is not None else {}
    if failed:
        logger.warning("readyz failing: %s", failed)
        return JsonResponse(envelope("Not ready.", "unavailable", {"failed": failed, **extra}), status=503)
    return JsonResponse({"status": "ok", "checks": {name: "ok" for name in checks}, **extra})


def _client_ip(request: HttpRequest) -> str:
    return request.META.get("REMOTE_ADDR", "")


@reads_only
def metrics(request: HttpRequest) -> HttpResponse:
    """Prometheus exposition, for a bearer METRICS_TOKEN or an allowed address only. The vector backlog's
    gauges are read from the database at each scrape, wherever the workers run; the queues' depth from the
    broker, and beat's last runs from its table."""
    token = settings.METRICS_TOKEN
    header = request.headers.get("Authorization", "")
    bearer = token and header.startswith("Bearer ") and hmac.compare_digest(header[7:].strip(), token)
    if bearer or _client_ip(request) in settings.METRICS_ALLOWED_IPS:
        try:
            report_backlog()  # the vector queues' length and oldest age, as of this scrape
        except DatabaseError as exc:  # the rest of the metrics still answer; /readyz says why
            logger.warning("Reading the vector backlog for /metrics failed: %s", exc)
        report_background()  # the queues' depth and beat's last runs, as of this scrape
        replica.replica_state(fresh=True)  # database_replica_lag_seconds, as of this scrape
        return ExportToDjangoView(request)
    return JsonResponse(
        envelope("Metrics need a METRICS_TOKEN bearer token or an allowed address.", "forbidden"), status=403
    )
