from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apikeys.services import agent_create
from memoryplatform.errors import ServiceError


class Command(BaseCommand):
    help = "Register an agent in the directory, creating any group it names that does not exist yet."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("agent_id", help="slug id, e.g. support-bot")
        parser.add_argument("--name", default="", help="display name")
        parser.add_argument("--model", default="", help="model the agent runs on")
        parser.add_argument("--capability", action="append", default=[], dest="capabilities")
        parser.add_argument("--group", action="append", default=[], dest="groups", help="repeatable")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            agent = agent_create(
                agent_id=options["agent_id"],
                display_name=options["name"],
                model=options["model"],
                capabilities=options["capabilities"],
                group_ids=options["groups"],
            )
        except ServiceError as exc:
            raise CommandError(exc.message) from exc
        groups = ", ".join(options["groups"]) or "none"
        self.stdout.write(self.style.SUCCESS(f"Created agent {agent.id} (groups: {groups})"))
