import os
import shutil
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser


class Command(BaseCommand):
    help = "Serve the API and admin with gunicorn (static files through WhiteNoise, no DEBUG needed)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--workers", type=int, default=2)

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
            "--timeout",
            "60",
            "--graceful-timeout",
            "10",
        ]
        self.stdout.write(f"Serving on http://{options['host']}:{options['port']} (Ctrl-C stops)")
        self.stdout.flush()
        os.execv(gunicorn, argv)  # noqa: S606  (replaces this process with gunicorn)
