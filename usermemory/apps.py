from django.apps import AppConfig


class UsermemoryConfig(AppConfig):
    name = "usermemory"
    verbose_name = "User memory"

    def ready(self) -> None:
        from memoryplatform.embeddings import jobs
        from usermemory.embedding import ENTRIES
        from usermemory.governance import MEMORY_POLICY
        from usermemory.policies import register_policy_part

        # Entries are re-embedded first (the scheduled run and `embed --missing`), then other apps' texts.
        jobs.register(ENTRIES)
        # The policy's first part; the apps above add theirs from their own ready().
        register_policy_part(MEMORY_POLICY)
