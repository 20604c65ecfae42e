from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from apikeys.models import ApiKey
from apikeys.services import apikey_create
from memoryplatform.errors import ServiceError


class Command(BaseCommand):
    help = "Make an API key. The raw key is printed once, alone on the last line of stdout."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--role", required=True, choices=ApiKey.Role.values)
        parser.add_argument("--agent", default=None, help="the agent an agent key acts as")
        parser.add_argument("--label", default="")
        parser.add_argument("--expires-days", type=int, default=None)

    def handle(self, *args: Any, **options: Any) -> None:
        days = options["expires_days"]
        if days is not None and days <= 0:
            raise CommandError("--expires-days must be a positive number of days.")
        expires_at = timezone.now() + timedelta(days=days) if days else None
        try:
            key, raw_key = apikey_create(
                role=options["role"], agent_id=options["agent"], label=options["label"], expires_at=expires_at
            )
        except ServiceError as exc:
            raise CommandError(exc.message) from exc
        bound = f" for agent {key.agent_id}" if key.agent_id else ""
        expiry = f", expires {key.expires_at:%Y-%m-%d %H:%M} UTC" if key.expires_at else ""
        self.stdout.write(
            f"Created {key.role} key {key.prefix}{bound}{expiry}. It is shown once; store it now:"
        )
        self.stdout.write(raw_key)
