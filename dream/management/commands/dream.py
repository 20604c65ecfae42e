import contextlib
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from apikeys.models import Agent
from dream import passes
from dream.models import DreamRun
from dream.selectors import dream_run_summary
from dream.services import MAX_BATCH_SIZE, dream_run_cycle
from memoryplatform.embeddings.consumer import yield_to_requests
from memoryplatform.management.progress import Unended
from memoryplatform.replica import reads_from_replica


class Command(BaseCommand):
    help = (
        "Run one Dream cycle now (its passes, dream.passes: pruning, summaries, contradictions and "
        "housekeeping, for every agent whose Dream is enabled), with a progress bar and a summary. --dry-run "
        "changes nothing and reports what it would do. Background work: it runs at a lower priority "
        "(BACKGROUND_NICE), as the scheduled cycle does."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--agent", metavar="ID", default=None, help="Only this agent's policy.")
        parser.add_argument("--dry-run", action="store_true", help="Count, change nothing.")
        parser.add_argument(
            "--batch-size", type=int, default=None, help=f"Rows per transaction (1..{MAX_BATCH_SIZE})."
        )
        parser.add_argument("--no-progress", action="store_true", help="No progress bar.")

    def handle(self, *args: Any, **options: Any) -> None:
        agent_id = options["agent"]
        if agent_id is not None and not Agent.objects.filter(id=agent_id).exists():
            raise CommandError(f"No agent '{agent_id}'.")
        batch_size = options["batch_size"]
        if batch_size is not None and not 1 <= batch_size <= MAX_BATCH_SIZE:
            raise CommandError(f"--batch-size must be between 1 and {MAX_BATCH_SIZE}.")

        yield_to_requests()  # the node's requests first, as for the scheduled cycle
        bar = tqdm(
            total=1,
            desc="dream",
            unit="step",
            file=Unended(self.stderr),
            disable=options["no_progress"],
            dynamic_ncols=True,
        )

        def on_progress(done: int, total: int, label: str) -> None:
            bar.total = total
            bar.n = done
            bar.set_postfix_str(label)
            bar.refresh()

        # A dry run changes nothing but its own record: its reads go to the replica when there is one.
        reads = reads_from_replica() if options["dry_run"] else contextlib.nullcontext()
        try:
            with reads:
                run = dream_run_cycle(
                    agent_id=agent_id,
                    dry_run=options["dry_run"],
                    trigger=DreamRun.Trigger.MANUAL,
                    batch_size=batch_size,
                    on_progress=on_progress,
                )
        except Exception as exc:
            bar.close()
            raise CommandError(f"Dream cycle failed: {type(exc).__name__}: {exc}") from exc
        bar.close()
        self._summary(run)

    def _summary(self, run: DreamRun) -> None:
        s = dream_run_summary(run=run)
        if run.status == DreamRun.Status.SKIPPED:
            self.stdout.write(self.style.WARNING(f"Run #{run.pk} skipped: {run.error}"))
            return
        would = "would be " if run.dry_run else ""
        lines = [
            f"Dream run #{run.pk} {run.status}" + (" (dry run: nothing was changed)" if run.dry_run else ""),
            f"  agents processed:     {s['agentsProcessed']}",
            f"  users processed:      {s['usersProcessed']}",
        ]
        for step in passes.PASSES:  # each pass's own lines, in the cycle's order
            lines.extend(step.report(run, s, would))
        if s["durationSeconds"] is not None:
            lines.append(f"  duration:             {s['durationSeconds']:.2f} s")
        if run.agents_processed == 0:
            lines.append(
                "  No agent has Dream enabled" + (f" ('{run.only_agent}')." if run.only_agent else ".")
            )
        self.stdout.write(self.style.SUCCESS("\n".join(lines)))
