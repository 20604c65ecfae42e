from django.apps import AppConfig


class UsermemoryConfig(AppConfig):
    name = "usermemory"
    verbose_name = "User memory"

    def ready(self) -> None:
        from memoryplatform.embeddings import jobs
        from usermemory.embedding import ENTRIES

        # Entries are re-embedded first (the scheduled run and `embed --missing`), then other apps' texts.
        jobs.register(ENTRIES)
