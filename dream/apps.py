from django.apps import AppConfig


class DreamConfig(AppConfig):
    name = "dream"
    verbose_name = "Dream (consolidation)"

    def ready(self) -> None:
        from dream import erasure
        from dream.passes import DREAM_POLICY
        from usermemory.policies import register_policy_part
        from usermemory.services import register_user_data

        # GDPR erasure and export of a user also cover what Dream's run records hold of them.
        register_user_data("dream", eraser=erasure.dream_erase_user, exporter=erasure.dream_export_user)
        # Dream's part of an agent's policy (dream.models.DreamPolicy), laid out pass by pass.
        register_policy_part(DREAM_POLICY)
