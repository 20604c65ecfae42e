import contextlib
import os
import time
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser
from django.utils import timezone

from dream.models import DreamRun
from dream.scheduler import dream_schedule_loop
from dream.services import dream_run_cycle
from memoryplatform.celery import crontab_next_after


class Command(BaseCommand):
    help = (
        "Run the Dream cycle on DREAM_SCHEDULE in this process, without Celery beat or Redis (the embedded "
        "default; `manage.py serve` starts it). Production runs `celery beat` instead."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--parent-pid", type=int, default=None, help="Stop when this process (the server) is gone."
        )
        parser.add_argument("--run-now", action="store_true", help="Run one cycle at start, then follow.")

    def handle(self, *args: Any, **options: Any) -> None:
        parent = options["parent_pid"]
        schedule = settings.DREAM_CRONTAB

        def should_stop() -> bool:
            return parent is not None and os.getppid() != parent

        self.stdout.write(f"Dream scheduler: cycles on '{settings.DREAM_SCHEDULE}' ({settings.TIME_ZONE})")
        self.stdout.flush()
        with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C reaches the whole process group
            dream_schedule_loop(
                next_after=lambda moment: crontab_next_after(schedule, moment),
                now=timezone.now,
                sleep=time.sleep,
                should_stop=should_stop,
                run_cycle=lambda: dream_run_cycle(trigger=DreamRun.Trigger.SCHEDULE),
                run_first=options["run_now"],
            )
