from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from apikeys.services import bootstrap_first_admin

# The first run's last words: the next two commands, an agent and its key (README: "Your first agent").
NEXT_AGENT = '.venv/bin/python manage.py createagent my-agent --name "My agent"'
NEXT_KEY = ".venv/bin/python manage.py createapikey --role agent --agent my-agent"


class Command(BaseCommand):
    help = (
        "Make sure a staff superuser and a first admin API key exist, and say how to sign in. "
        "The password and key are printed only by the run that creates them."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--username", default="admin")
        parser.add_argument(
            "--password", default=None, help="default: MEMORYPLATFORM_ADMIN_PASSWORD or random"
        )
        parser.add_argument("--url", default="http://127.0.0.1:8000")

    def handle(self, *args: Any, **options: Any) -> None:
        import os

        password = options["password"] or os.environ.get("MEMORYPLATFORM_ADMIN_PASSWORD") or None
        result = bootstrap_first_admin(username=options["username"], password=password)
        url = options["url"].rstrip("/")
        line = "=" * 72
        self.stdout.write(line)
        if result.created:
            self.stdout.write(
                f"Admin:    {url}/admin/   user: {result.username}   password: {result.password}"
            )
            self.stdout.write(f"API docs: {url}/api/docs/")
            self.stdout.write(
                "First admin API key (shown once, store it now; send it as 'Authorization: Bearer <key>'):"
            )
            self.stdout.write(f"  {result.raw_key}")
            self.stdout.write("Next: add an agent, then make its key (printed once, on the last line):")
            self.stdout.write(f"  {NEXT_AGENT}")
            self.stdout.write(f"  {NEXT_KEY}")
        else:
            self.stdout.write(
                f"Admin:    {url}/admin/   user: {result.username} (password as printed on the first run;"
            )
            self.stdout.write(
                f"          reset it with: .venv/bin/python manage.py changepassword {result.username})"
            )
            self.stdout.write(f"API docs: {url}/api/docs/")
            self.stdout.write(
                "Admin API keys are shown once; make another with: "
                ".venv/bin/python manage.py createapikey --role admin"
            )
        self.stdout.write(line)
