from django.apps import AppConfig


class ExtractionConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "extraction"
    verbose_name = "Memory extraction"

    def ready(self) -> None:
        from extraction.services import register_extraction_user_data

        register_extraction_user_data()
