from django.apps import AppConfig


class UsermemoryConfig(AppConfig):
    name = "usermemory"
    verbose_name = "User memory"

    def ready(self) -> None:
        from django.conf import settings

        from memoryplatform.embeddings import jobs
        from memoryplatform.schedules import Schedule, schedule_register
        from usermemory.embedding import ENTRIES
        from usermemory.governance import MEMORY_POLICY
        from usermemory.policies import register_policy_part

        # Entries are re-embedded first (the scheduled run and `embed --missing`), then other apps' texts.
        jobs.register(ENTRIES)
        # The policy's first part; the apps above add theirs from their own ready().
        register_policy_part(MEMORY_POLICY)
        # The re-embedding of missing, stale and other-model vectors (usermemory/tasks.py).
        schedule_register(
            Schedule(
                name="vectors-reembed",
                task="vectors.reembed",
                description="Re-embed missing, stale and other-model vectors (EMBEDDINGS_REEMBED_INTERVAL).",
                every_seconds=lambda: settings.EMBEDDINGS_REEMBED_INTERVAL,
                enabled=lambda: settings.EMBEDDINGS_PROVIDER != "none",
            )
        )
