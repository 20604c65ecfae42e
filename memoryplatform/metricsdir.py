"""Where the server's processes keep their metrics, so that one /metrics shows them all.

``manage.py serve`` puts prometheus_client in multiprocess mode over :func:`server_metrics_dir` (unless
``PROMETHEUS_MULTIPROC_DIR`` names another directory). A command that does the server's work by hand
(``manage.py dream``, ``manage.py embed``) counts into the same directory when it exists, so a Dream cycle
run from the shell reaches /metrics as one a worker runs does. prometheus_client reads the variable when
it is first imported, so :func:`join_server_metrics` runs in ``manage.py`` before Django loads the apps.
"""

import os
from pathlib import Path

SHARED_COMMANDS = frozenset({"dream", "embed"})


def server_metrics_dir() -> Path:
    from django.conf import settings

    return Path(settings.DATA_DIR) / "prometheus"


def join_server_metrics(argv: list[str]) -> None:
    """For a command in :data:`SHARED_COMMANDS`, count into the server's metrics directory if it has one."""
    if len(argv) < 2 or argv[1] not in SHARED_COMMANDS or os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        return
    directory = server_metrics_dir()
    if directory.is_dir():
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(directory)


def serve_metrics_port(port: int) -> None:
    """Serve this process's metrics (every process's, in multiprocess mode) on ``port``: a Celery
    worker's or beat's, where they run apart from the web server (WORKER_METRICS_PORT, BEAT_METRICS_PORT)."""
    from prometheus_client import REGISTRY, CollectorRegistry, start_http_server

    registry = REGISTRY
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
    start_http_server(port, registry=registry)
