import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser
from django.db import connection
from django.utils import timezone

from dream.models import DreamRun
from dream.scheduler import DREAM_CHANNEL, DREAM_LISTENER, cron_next_after, dream_schedule_loop
from dream.services import dream_run_cycle
from extraction.background import extraction_run_background
from memoryplatform import listen
from memoryplatform.embeddings import consumer
from memoryplatform.metricsdir import serve_metrics_port
from memoryplatform.supervisor import supervise
from usermemory.embedding import memory_reembed_scheduled


class Command(BaseCommand):
    help = (
        "Run the platform's background work in this process: the Dream cycle on DREAM_SCHEDULE (and at once "
        "when the admin asks), and on threads the vector consumer (the texts writes queue, as they "
        "commit), the re-embedding of stale and other-model vectors every EMBEDDINGS_REEMBED_INTERVAL "
        "seconds, and the background extraction. `manage.py serve` starts it beside the server; a "
        "deployment runs it as a service of its own. A background process: it runs at a lower priority "
        "(BACKGROUND_NICE)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--parent-pid", type=int, default=None, help="Stop when this process (the server) is gone."
        )
        parser.add_argument("--run-now", action="store_true", help="Run one cycle at start, then follow.")
        parser.add_argument(
            "--supervise",
            action="store_true",
            help="Run the scheduler as a child process and start it again whenever it dies (what `manage.py "
            "serve` starts; memoryplatform.supervisor).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        parent = options["parent_pid"]
        schedule = settings.DREAM_SCHEDULE

        def should_stop() -> bool:
            return parent is not None and os.getppid() != parent

        if options["supervise"]:
            argv = [sys.executable, str(Path(settings.BASE_DIR) / "manage.py"), "dream_scheduler"]
            argv += ["--parent-pid", str(os.getpid()), *(["--run-now"] if options["run_now"] else [])]
            supervise(argv, parent_gone=should_stop, cwd=str(settings.BASE_DIR))
            return
        consumer.yield_to_requests()
        port = os.environ.get("WORKER_METRICS_PORT", "").strip()
        if port:  # a process apart from the web server (docker-compose.yml's scheduler)
            serve_metrics_port(int(port))
        self.stdout.write(f"Dream scheduler: cycles on '{settings.DREAM_SCHEDULE}' ({settings.TIME_ZONE})")
        if settings.EMBEDDINGS_PROVIDER != "none":
            threading.Thread(
                target=consumer_loop, args=(should_stop,), name="vector-consumer", daemon=True
            ).start()
            self.stdout.write("Embedding queued texts as writes queue them (the vector consumer)")
        interval = settings.EMBEDDINGS_REEMBED_INTERVAL
        if interval > 0 and settings.EMBEDDINGS_PROVIDER != "none":
            threading.Thread(
                target=reembed_loop, args=(interval, should_stop), name="reembed", daemon=True
            ).start()
            self.stdout.write(f"Re-embedding missing, stale and other-model vectors every {interval} s")
        extraction = settings.EXTRACTION_INTERVAL
        if extraction > 0 and settings.LLM_PROVIDER:
            threading.Thread(
                target=extraction_loop, args=(extraction, should_stop), name="extraction", daemon=True
            ).start()
            self.stdout.write(f"Extracting facts from stored conversations every {extraction} s")
        self.stdout.flush()
        # Ctrl-C reaches the whole process group. A lost listening connection ends the process, which its
        # supervisor (or the deployment's restart policy) starts again.
        with (
            contextlib.suppress(KeyboardInterrupt),
            listen.listening(DREAM_CHANNEL, name=DREAM_LISTENER) as conn,
        ):
            dream_schedule_loop(
                next_after=lambda moment: cron_next_after(schedule, moment),
                now=timezone.now,
                wait=lambda seconds: bool(listen.notifications(conn, timeout=seconds)),
                should_stop=should_stop,
                run_cycle=lambda asked: dream_run_cycle(
                    trigger=DreamRun.Trigger.ADMIN if asked else DreamRun.Trigger.SCHEDULE
                ),
                run_first=options["run_now"],
            )


def pause(seconds: float) -> bool:
    """Sleep; nothing asks these loops for a run."""
    time.sleep(seconds)
    return False


def consumer_loop(should_stop: Callable[[], bool]) -> None:
    try:
        consumer.follow(should_stop=should_stop)
    finally:
        connection.close()


def reembed_loop(interval: int, should_stop: Callable[[], bool]) -> None:
    """Re-embed at start and every ``interval`` seconds; a run that stops at its time budget (``partial``) is
    followed at once by the next, so a change of model is caught up without waiting for the interval."""

    def run(asked: bool) -> None:
        try:
            while memory_reembed_scheduled() == "partial" and not should_stop():
                pass
        finally:
            connection.close()  # this thread's connection: none held idle between runs

    def next_after(moment: datetime) -> datetime:
        return moment + timedelta(seconds=interval)

    dream_schedule_loop(
        next_after=next_after,
        now=timezone.now,
        wait=pause,
        should_stop=should_stop,
        run_cycle=run,
        run_first=True,
        what="re-embedding",
    )


def extraction_loop(interval: int, should_stop: Callable[[], bool]) -> None:
    """Background extraction from stored conversations at start and every ``interval`` seconds."""

    def run(asked: bool) -> None:
        try:
            extraction_run_background()
        finally:
            connection.close()  # this thread's connection: none held idle between runs

    dream_schedule_loop(
        next_after=lambda moment: moment + timedelta(seconds=interval),
        now=timezone.now,
        wait=pause,
        should_stop=should_stop,
        run_cycle=run,
        run_first=True,
        what="extraction",
    )
