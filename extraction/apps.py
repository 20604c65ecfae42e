from django.apps import AppConfig


class ExtractionConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "extraction"
    verbose_name = "Memory extraction"

    def ready(self) -> None:
        from extraction.policy import EXTRACTION_POLICY
        from extraction.services import register_extraction_user_data
        from usermemory.policies import register_policy_part

        register_extraction_user_data()
        register_policy_part(EXTRACTION_POLICY)
