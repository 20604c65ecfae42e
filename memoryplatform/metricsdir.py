"""Where the server's processes keep their metrics, so that one /metrics shows them all.

``manage.py serve`` puts prometheus_client in multiprocess mode over :func:`server_metrics_dir` (unless
``PROMETHEUS_MULTIPROC_DIR`` names another directory). A command that does the server's work by hand
(``manage.py dream``, ``manage.py embed``) counts into the same directory when it exists, so a Dream cycle
run from the shell reaches /metrics as one a worker runs does. prometheus_client reads the variable when
it is first imported, so :func:`join_server_metrics` runs in ``manage.py`` before Django loads the apps.

A server empties the directory when it starts, as the files of processes gone would count again, but only
when no other server uses it: each server holds a shared lock on ``DATA_DIR/prometheus.lock`` for as long as
it runs (:func:`hold_server_metrics_dir`), and the directory is emptied only under the exclusive one. A
second ``manage.py serve`` on the same ``DATA_DIR`` joins the directory as it is, so the running server's
/metrics keeps its series (issue 53).
"""

import fcntl
import os
import shutil
from pathlib import Path

SHARED_COMMANDS = frozenset({"dream", "embed"})


def server_metrics_dir() -> Path:
    from django.conf import settings

    return Path(settings.DATA_DIR) / "prometheus"


def hold_server_metrics_dir(directory: Path) -> bool:
    """Hold the shared lock of ``directory`` (its sibling ``<name>.lock``) for as long as this process and
    the program it ``execv``s into run: the kernel lets it go when the process ends, however it ends. Empty
    the directory first if no other server holds it (the exclusive lock is free). Returns whether it was
    emptied. ``flock`` turns the exclusive lock into the shared one in two steps, so a server starting at
    the same moment may empty it too, before either has workers counting into it."""
    directory.parent.mkdir(parents=True, exist_ok=True)
    lock = os.open(directory.with_name(f"{directory.name}.lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        alone = False
    else:
        alone = True
        shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(exist_ok=True)
    fcntl.flock(lock, fcntl.LOCK_SH)  # waits while another server empties it
    os.set_inheritable(lock, True)  # kept open, and so held, across the server's execv
    return alone


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
