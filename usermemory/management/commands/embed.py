from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from memoryplatform.embeddings import EmbedderError, consumer, get_embedder, jobs
from memoryplatform.management.progress import Unended


class Command(BaseCommand):
    help = (
        "Compute the vectors of memory entries and conversation messages by hand (a worker's `vectors.drain` "
        "task does it as writes commit). --drain embeds what is queued now and stops. --missing embeds "
        "every text whose vector is missing, of another text, or of another model than EMBEDDINGS_MODEL, "
        "in batches, with a progress bar (entries first, then messages). Idempotent; safe to run beside "
        "writes. One pass at a time: it stops with a message while another (the background re-embedding) "
        "runs."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--missing", action="store_true", help="Embed missing and stale vectors (required)."
        )
        parser.add_argument("--drain", action="store_true", help="Embed every queued text, then stop.")
        parser.add_argument(
            "--batch-size",
            type=int,
            default=None,
            help="Texts per embedder call (default EMBEDDINGS_BATCH_SIZE).",
        )
        parser.add_argument("--no-progress", action="store_true", help="No progress bar.")

    def handle(self, *args: Any, **options: Any) -> None:
        modes = [m for m in ("missing", "drain") if options[m]]
        if len(modes) != 1:
            raise CommandError("Say what to embed: one of --drain or --missing.")
        batch_size = options["batch_size"] or settings.EMBEDDINGS_BATCH_SIZE
        if not 1 <= batch_size <= 10_000:
            raise CommandError("--batch-size must be between 1 and 10000.")
        try:
            embedder = get_embedder()
        except EmbedderError as exc:
            raise CommandError(str(exc)) from exc
        if embedder is None:
            raise CommandError("EMBEDDINGS_PROVIDER is 'none': there is nothing to embed with.")
        if options["drain"]:
            done = consumer.drain(batch_size=batch_size)
            self.stdout.write(
                self.style.SUCCESS(
                    f"{done.written} vectors written; {done.claimed} queued texts taken, "
                    f"{done.failed} failed (they stay queued)."
                )
            )
            return
        for kind in jobs.registered():
            quiet = options["no_progress"]
            self._embed(kind, embedder_id=embedder.model_id, batch_size=batch_size, quiet=quiet)

    def _embed(self, kind: jobs.VectorKind, *, embedder_id: str, batch_size: int, quiet: bool) -> None:
        bar = tqdm(
            total=0,
            desc=f"embed {kind.name} ({embedder_id})",
            unit="text",
            file=Unended(self.stderr),
            disable=quiet,
            dynamic_ncols=True,
        )

        def on_progress(done: int, total: int) -> None:
            bar.total = total
            bar.n = done
            bar.refresh()

        try:
            result = jobs.embed_missing(kind=kind, batch_size=batch_size, on_progress=on_progress)
        except EmbedderError as exc:
            raise CommandError(f"The embedder failed: {exc}") from exc
        except jobs.ReembedBusy as exc:
            raise CommandError(
                f"{exc} (the background re-embedding, or another `embed`): it does this work; "
                f"try again later."
            ) from exc
        finally:
            bar.close()
        self.stdout.write(
            self.style.SUCCESS(
                f"{result.written} vectors written ({result.pending} {kind.name} were missing or stale; "
                f"{embedder_id})."
            )
        )
