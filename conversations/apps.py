from django.apps import AppConfig


class ConversationsConfig(AppConfig):
    name = "conversations"
    verbose_name = "Conversations"

    def ready(self) -> None:
        from conversations import export, services
        from usermemory.services import register_user_data

        # GDPR erasure and export of a user also remove and export their conversations.
        register_user_data(
            "conversations",
            eraser=services.conversation_erase_user,
            exporter=export.conversation_export_user,
        )
