from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apikeys.services import apikey_revoke
from memoryplatform.errors import ServiceError


class Command(BaseCommand):
    help = "Revoke an API key by its prefix (see listapikeys)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("prefix")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            key = apikey_revoke(prefix=options["prefix"])
        except ServiceError as exc:
            raise CommandError(exc.message) from exc
        self.stdout.write(self.style.SUCCESS(f"Revoked key {key.prefix} ({key.role})"))
