from django.apps import AppConfig


class DreamConfig(AppConfig):
    name = "dream"
    verbose_name = "Dream (consolidation)"

    def ready(self) -> None:
        from django.conf import settings

        from dream import erasure
        from dream.passes import DREAM_POLICY
        from memoryplatform.schedules import Schedule, schedule_register
        from usermemory.policies import register_policy_part
        from usermemory.services import register_user_data

        # GDPR erasure and export of a user also cover what Dream's run records hold of them.
        register_user_data("dream", eraser=erasure.dream_erase_user, exporter=erasure.dream_export_user)
        # Dream's part of an agent's policy (dream.models.DreamPolicy), laid out pass by pass.
        register_policy_part(DREAM_POLICY)
        # The cycle on DREAM_SCHEDULE (dream/tasks.py); the admin's Periodic tasks hold it after the first
        # migrate.
        schedule_register(
            Schedule(
                name="dream-cycle",
                task="dream.run_cycle",
                description="Dream's cycle: stale pruning, contradictions, summaries (DREAM_SCHEDULE).",
                crontab=lambda: settings.DREAM_SCHEDULE,
                kwargs={"trigger": "schedule"},
            )
        )
