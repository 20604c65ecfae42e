import json
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from extraction.background import BATCH_SIZE, extraction_run_background


class Command(BaseCommand):
    help = (
        "Run one background extraction now: facts from the new messages of the conversations of the agents "
        "whose policy has extractFromConversations (a worker runs it every EXTRACTION_INTERVAL "
        "seconds: beat's extraction-background). Prints the run's counts as JSON."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--agent", default=None, help="Only this agent.")
        parser.add_argument(
            "--batch-size", type=int, default=BATCH_SIZE, help="Messages per LLM call (1-50)."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        result = extraction_run_background(agent_id=options["agent"], batch_size=options["batch_size"])
        self.stdout.write(json.dumps(result, indent=2))
