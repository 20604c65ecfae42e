import sys
from contextlib import ExitStack
from typing import Any, BinaryIO

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from memoryplatform.management.progress import Unended
from usermemory.importing import DEFAULT_BATCH_SIZE, MAX_BATCH_SIZE, ImportReport, memory_import
from usermemory.management.importlines import FORMATS, read_lines


class Command(BaseCommand):
    help = (
        "Import memories from a JSON Lines file (one memory a line; '-' reads stdin) through the same "
        "service as a REST upsert, each line written as the agent it names (sourceAgentId, by id or "
        "display name; --agent for lines that name none), with that agent's rules. "
        "--format eddi (default): each line is a PUT /usermemorystore/memories body (userId, key, value, "
        "category, visibility, sourceAgentId, groupIds, ...). "
        "--format mem0: each line is one memory as mem0's get_all returns it (id, memory, user_id, "
        "agent_id, ...); its key is 'mem0:<id>'. mem0 documents no export file format of its own (its "
        "memory export fills a schema the caller supplies), so get_all's records are what is read. "
        "Idempotent: a line whose memory is already stored as it says is skipped, and so is one observed "
        "(observedAt, else now) before the stored value was. A line the rules refuse "
        "is reported and the import goes on; a malformed line stops it (exit 1), after the lines before it "
        "are written. See README, 'Importing memories'."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="a JSON Lines file, or '-' for stdin")
        parser.add_argument("--format", choices=FORMATS, default="eddi", dest="fmt", help="default: eddi")
        parser.add_argument(
            "--agent", default=None, help="the agent (id or display name) of the lines that name none"
        )
        parser.add_argument(
            "--dry-run", action="store_true", help="check every line through the services, write nothing"
        )
        parser.add_argument(
            "--batch-size",
            type=int,
            default=DEFAULT_BATCH_SIZE,
            help=f"lines per transaction, 1 to {MAX_BATCH_SIZE} (default {DEFAULT_BATCH_SIZE})",
        )
        parser.add_argument("--no-progress", action="store_true", help="no progress bar")

    def handle(self, *args: Any, **options: Any) -> None:
        if not 1 <= options["batch_size"] <= MAX_BATCH_SIZE:
            raise CommandError(f"--batch-size must be from 1 to {MAX_BATCH_SIZE}.")
        with ExitStack() as stack:
            source = self._open(options["file"], stack)
            bar = stack.enter_context(
                tqdm(desc="import", unit="line", file=Unended(self.stderr), disable=options["no_progress"])
            )

            def on_batch(report: ImportReport) -> None:
                bar.n = report.read
                bar.refresh()

            report = memory_import(
                lines=read_lines(source, fmt=options["fmt"]),
                default_agent=options["agent"],
                dry_run=options["dry_run"],
                batch_size=options["batch_size"],
                on_batch=on_batch,
            )
        self._print(report)
        if report.malformed is not None:
            bad = report.malformed
            done = "checked" if report.dry_run else "imported"
            raise CommandError(
                f"line {bad.number} is malformed: {bad.reason} The import stopped there: the lines before it "
                f"are {done}, nothing of line {bad.number} or after is written. Fix it and run the same "
                "import again: what is already imported is skipped."
            )

    def _open(self, path: str, stack: ExitStack) -> BinaryIO:
        if path == "-":
            return sys.stdin.buffer
        try:
            return stack.enter_context(open(path, "rb"))  # noqa: SIM115 (closed by the stack)
        except OSError as exc:
            raise CommandError(f"Cannot read {path}: {exc.strerror}.") from exc

    def _print(self, report: ImportReport) -> None:
        for refusal in report.refused:
            self.stdout.write(f"line {refusal.number}: refused ({refusal.code}): {refusal.reason}")
        for older in report.older:
            self.stdout.write(f"line {older.number}: skipped (time order): {older.reason}")
        verb = "would be written" if report.dry_run else "written"
        lines = "line" if report.read == 1 else "lines"
        summary = (
            f"{report.read} {lines} read: {report.written} {verb} ({report.created} new, {report.updated} "
            f"updated), {report.skipped} skipped (already stored as given), "
            + (f"{len(report.older)} skipped (the stored value was observed later), " if report.older else "")
            + f"{len(report.refused)} refused."
        )
        if report.dry_run:
            summary = f"Dry run, nothing was written. {summary}"
        elif report.vectors_pending:
            summary += (
                f" {report.vectors_pending} of the entries written wait for their vectors (the vector "
                "consumer embeds them; meanwhile they are found by their words; `manage.py embed --drain` "
                "waits)."
            )
        style = self.style.SUCCESS if not report.refused and report.malformed is None else self.style.WARNING
        self.stdout.write(style(summary))
