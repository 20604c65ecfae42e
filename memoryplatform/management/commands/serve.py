import os
import shutil
import subprocess
import sys
from argparse import BooleanOptionalAction
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser


def prepare_metrics_dir() -> str:
    """Put prometheus_client in multiprocess mode for gunicorn's workers and the Dream scheduler, so the
    web's /metrics shows every process's counters (the scheduler's Dream counters included). Uses
    PROMETHEUS_MULTIPROC_DIR when set; otherwise var/prometheus, emptied at each start."""
    configured = os.environ.get("PROMETHEUS_MULTIPROC_DIR", "")
    if configured:
        Path(configured).mkdir(parents=True, exist_ok=True)
        return configured
    directory = Path(settings.BASE_DIR) / "var" / "prometheus"
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(directory)
    return str(directory)


def scheduler_argv(parent_pid: int) -> list[str]:
    """The Dream scheduler child: one process beside gunicorn, stopping when the server does."""
    manage = str(Path(settings.BASE_DIR) / "manage.py")
    return [sys.executable, manage, "dream_scheduler", "--parent-pid", str(parent_pid)]


class Command(BaseCommand):
    help = (
        "Serve the API and admin with gunicorn (static files through WhiteNoise, no DEBUG needed). Without "
        "REDIS_URL it also runs the Dream schedule in one scheduler process beside the web workers."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--workers", type=int, default=2)
        parser.add_argument(
            "--threads",
            type=int,
            default=2,
            help="Threads per worker (gunicorn's gthread worker): while one request waits on the database, "
            "another runs. 1 gives the sync worker.",
        )
        parser.add_argument(
            "--dream-scheduler",
            action=BooleanOptionalAction,
            default=None,
            help="Run Dream on DREAM_SCHEDULE in a child process (default: on when REDIS_URL is empty; "
            "with Redis, Celery beat does it).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        gunicorn = shutil.which("gunicorn", path=os.path.dirname(sys.executable)) or shutil.which("gunicorn")
        if gunicorn is None:
            raise CommandError("gunicorn is not installed in this environment.")
        argv = [
            gunicorn,
            "memoryplatform.wsgi:application",
            "--bind",
            f"{options['host']}:{options['port']}",
            "--workers",
            str(options["workers"]),
            "--threads",
            str(options["threads"]),
            "--timeout",
            "60",
            "--graceful-timeout",
            "10",
        ]
        prepare_metrics_dir()
        run_scheduler = options["dream_scheduler"]
        if run_scheduler is None:
            run_scheduler = not settings.REDIS_URL
        if run_scheduler:
            # This pid carries on as gunicorn's master after execv, so the child stops with the server.
            subprocess.Popen(scheduler_argv(os.getpid()), cwd=settings.BASE_DIR)  # noqa: S603
            self.stdout.write(f"Dream runs on '{settings.DREAM_SCHEDULE}' in a scheduler process.")
        self.stdout.write(f"Serving on http://{options['host']}:{options['port']} (Ctrl-C stops)")
        self.stdout.flush()
        os.execv(gunicorn, argv)  # noqa: S606  (replaces this process with gunicorn)
