from django.apps import AppConfig


class ConversationsConfig(AppConfig):
    name = "conversations"
    verbose_name = "Conversations"

    def ready(self) -> None:
        from conversations import export, services
        from conversations.embedding import MESSAGES
        from memoryplatform.embeddings import jobs
        from usermemory.services import register_user_data

        # Message vectors are re-embedded after entries' (the scheduled run and `embed --missing`).
        jobs.register(MESSAGES)

        # GDPR erasure and export of a user also remove and export their conversations.
        register_user_data(
            "conversations",
            eraser=services.conversation_erase_user,
            exporter=export.conversation_export_user,
        )
