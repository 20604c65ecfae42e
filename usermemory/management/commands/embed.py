from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from memoryplatform.embeddings import EmbedderError, get_embedder
from memoryplatform.management.progress import Unended
from usermemory.embedding import ReembedBusy, memory_embed_missing


class Command(BaseCommand):
    help = (
        "Compute the vectors of memory entries: --missing embeds every entry whose vector is missing, of "
        "another text, or of another model than EMBEDDINGS_MODEL, in batches, with a progress bar. "
        "Idempotent; safe to run beside writes. One pass at a time: it stops with a message while another "
        "(the background re-embedding) runs."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--missing", action="store_true", help="Embed missing and stale vectors (required)."
        )
        parser.add_argument(
            "--batch-size",
            type=int,
            default=None,
            help="Entries per embedder call (default EMBEDDINGS_BATCH_SIZE).",
        )
        parser.add_argument("--no-progress", action="store_true", help="No progress bar.")

    def handle(self, *args: Any, **options: Any) -> None:
        if not options["missing"]:
            raise CommandError("Say what to embed: --missing.")
        batch_size = options["batch_size"] or settings.EMBEDDINGS_BATCH_SIZE
        if not 1 <= batch_size <= 10_000:
            raise CommandError("--batch-size must be between 1 and 10000.")
        try:
            embedder = get_embedder()
        except EmbedderError as exc:
            raise CommandError(str(exc)) from exc
        if embedder is None:
            raise CommandError("EMBEDDINGS_PROVIDER is 'none': there is nothing to embed with.")
        bar = tqdm(
            total=0,
            desc=f"embed ({embedder.model_id})",
            unit="entry",
            file=Unended(self.stderr),
            disable=options["no_progress"],
            dynamic_ncols=True,
        )

        def on_progress(done: int, total: int) -> None:
            bar.total = total
            bar.n = done
            bar.refresh()

        try:
            result = memory_embed_missing(batch_size=batch_size, on_progress=on_progress)
        except EmbedderError as exc:
            raise CommandError(f"The embedder failed: {exc}") from exc
        except ReembedBusy as exc:
            raise CommandError(
                f"{exc} (the background re-embedding, or another `embed`): it does this work; "
                f"try again later."
            ) from exc
        finally:
            bar.close()
        self.stdout.write(
            self.style.SUCCESS(
                f"{result.written} vectors written ({result.pending} entries were missing or stale; "
                f"{embedder.model_id})."
            )
        )
