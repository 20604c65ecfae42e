from django.apps import AppConfig


class DreamConfig(AppConfig):
    name = "dream"
    verbose_name = "Dream (consolidation)"

    def ready(self) -> None:
        from dream import erasure
        from usermemory.services import register_user_data

        # GDPR erasure and export of a user also cover what Dream's run records hold of them.
        register_user_data("dream", eraser=erasure.dream_erase_user, exporter=erasure.dream_export_user)
