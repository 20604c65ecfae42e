from django.apps import AppConfig


class ActivityConfig(AppConfig):
    name = "activity"
    verbose_name = "Agent activity"

    def ready(self) -> None:
        from activity import budget, export, services
        from activity.policy import ACTIVITY_POLICY
        from memoryplatform.rerank.llm import register_spending
        from usermemory.policies import register_policy_part
        from usermemory.services import register_user_data

        # GDPR erasure and export of a user also remove and export their tasks and the tool calls naming them.
        register_user_data(
            "activity", eraser=services.activity_erase_user, exporter=export.activity_export_user
        )
        register_policy_part(ACTIVITY_POLICY)
        # The kernel's LLM reranker pays its calls from the reading agent's budget, as every LLM call does.
        register_spending(budget.rerank_spending)
