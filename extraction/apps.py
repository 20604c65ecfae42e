from django.apps import AppConfig


class ExtractionConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "extraction"
    verbose_name = "Memory extraction"

    def ready(self) -> None:
        from django.conf import settings

        from extraction.policy import EXTRACTION_POLICY
        from extraction.services import register_extraction_user_data
        from memoryplatform.schedules import Schedule, schedule_register
        from usermemory.policies import register_policy_part

        register_extraction_user_data()
        register_policy_part(EXTRACTION_POLICY)
        # Extraction from stored conversations (extraction/tasks.py), with an LLM.
        schedule_register(
            Schedule(
                name="extraction-background",
                task="extraction.run_background",
                description="Extract facts from stored conversations "
                "(EXTRACTION_INTERVAL, with LLM_PROVIDER).",
                every_seconds=lambda: settings.EXTRACTION_INTERVAL,
                enabled=lambda: bool(settings.LLM_PROVIDER),
            )
        )
