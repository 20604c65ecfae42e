import errno
import logging
import os
import socket
import sys
from argparse import BooleanOptionalAction
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DEFAULT_DB_ALIAS

from memoryplatform.broker import broker_kind
from memoryplatform.management.processes import (
    READY_TIMEOUT,
    ProcessGroup,
    celery_beat_argv,
    celery_worker_argv,
)
from memoryplatform.metricsdir import hold_server_metrics_dir, server_metrics_dir

logger = logging.getLogger(__name__)


def prepare_metrics_dir() -> str:
    """Put prometheus_client in multiprocess mode for the server's workers and the Celery worker and beat, so
    the web's /metrics shows every process's counters (the tasks' and Dream's included). Uses
    PROMETHEUS_MULTIPROC_DIR when set; otherwise ``DATA_DIR/prometheus`` (:func:`server_metrics_dir`), emptied
    at a start unless another server on the same DATA_DIR uses it (:func:`hold_server_metrics_dir`), which
    ``manage.py dream`` and ``embed`` then count into too (``manage.py``)."""
    configured = os.environ.get("PROMETHEUS_MULTIPROC_DIR", "")
    if configured:
        Path(configured).mkdir(parents=True, exist_ok=True)
        return configured
    directory = server_metrics_dir()
    if not hold_server_metrics_dir(directory):
        logger.warning(
            "Another server uses %s (same DATA_DIR): this one counts into it too, without emptying it.",
            directory,
        )
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(directory)
    return str(directory)


def check_port_free(host: str, port: int) -> None:
    """Bind the address as the server will, then let it go: a port in use is a clear error before anything
    starts (uvicorn would otherwise fail after its banner)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise CommandError(f"Cannot serve on {host}:{port}: {exc.strerror}.") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the servers do: TIME_WAIT is free
        try:
            probe.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise CommandError(
                    f"Port {port} on {host} is already in use. Stop what serves there, or choose another "
                    f"port (make run PORT=8001, or serve --port 8001)."
                ) from None
            raise CommandError(f"Cannot serve on {host}:{port}: {exc.strerror}.") from None


def uvicorn_argv(*, host: str, port: int, workers: int) -> list[str]:
    """uvicorn serving ``config.asgi`` in worker processes of its own (it restarts a dead one)."""
    return [
        sys.executable,
        "-m",
        "uvicorn",
        "config.asgi:application",
        "--host",
        host,
        "--port",
        str(port),
        "--workers",
        str(workers),
        "--lifespan",
        "on",
        "--no-access-log",  # the request log middleware writes one line per API request
        "--no-server-header",
        "--no-proxy-headers",  # REMOTE_ADDR is the peer (METRICS_ALLOWED_IPS relies on it)
        "--timeout-keep-alive",
        "5",
        "--timeout-graceful-shutdown",
        "10",
    ]


class Command(BaseCommand):
    help = (
        "Serve the API, the admin and the MCP server (static files through WhiteNoise, no DEBUG needed) with "
        "uvicorn: config.asgi in worker processes; and, once it answers, the background work beside it: a "
        "Celery worker and beat (--no-background: not, where services of their own run them). Ctrl-C stops "
        "them all."
    )
    # Checked in handle(), after the port: a port in use is the first thing said. The checks include the
    # database ones (PostgreSQL 15+ with pgvector), which cost one connection.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--workers", type=int, default=2, help="Worker processes.")
        parser.add_argument(
            "--threads",
            type=int,
            default=4,
            help="Threads per worker running Django's views (under uvicorn, once a request's body is in).",
        )
        parser.add_argument(
            "--check-port",
            action="store_true",
            help="Only check that the address is free (exit 1 if it is in use), then exit.",
        )
        parser.add_argument(
            "--background",
            action=BooleanOptionalAction,
            default=True,
            help="Run a Celery worker (every queue) and beat beside the server (default: on; off where "
            "services of their own run them).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        host, port, workers = options["host"], options["port"], options["workers"]
        check_port_free(host, port)
        if options["check_port"]:
            return
        self.check(databases=[DEFAULT_DB_ALIAS])
        os.environ["SERVE_THREADS"] = str(options["threads"])  # read by config.asgi
        prepare_metrics_dir()
        group = ProcessGroup(cwd=str(settings.BASE_DIR))
        group.start("web", uvicorn_argv(host=host, port=port, workers=workers))
        self.stdout.write(f"Serving on http://{host}:{port} (Ctrl-C stops)")
        self.stdout.flush()
        if options["background"] and group.wait_ready(f"http://{host}:{port}/readyz", timeout=READY_TIMEOUT):
            group.start("worker", celery_worker_argv())
            group.start("beat", celery_beat_argv())
            self.stdout.write(
                "Background work: a Celery worker and beat "
                f"(broker: {broker_kind(settings.CELERY_BROKER_URL)}; Dream on beat's 'dream-cycle' schedule)"
            )
            self.stdout.flush()
        sys.exit(group.run())
