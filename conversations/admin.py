"""Conversations and their messages, read-only: the case log is append-only and only GDPR erasure removes a
user's conversations."""

from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html

from conversations.models import Checkpoint, Conversation, Message
from memoryplatform.admin_mixins import ReadOnlyAdminMixin

MESSAGE_FIELDS = (
    "position",
    "seq",
    "channel",
    "role",
    "agent",
    "memory_epoch",
    "content",
    "session_id",
    "created_at",
)


class MessageInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = Message
    extra = 0
    readonly_fields = MESSAGE_FIELDS
    fields = readonly_fields
    ordering = ["position"]  # every channel's messages in the order written (seq counts one scope each)
    show_change_link = True


class CheckpointInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = Checkpoint
    extra = 0
    readonly_fields = ("agent", "last_message_id", "last_seq", "updated_at")
    fields = readonly_fields


@admin.register(Conversation)
class ConversationAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["id", "user_id", "title", "group", "created_at", "messages_link"]
    list_filter = ["group", "created_at"]
    search_fields = ["=id", "user_id", "title"]
    list_select_related = ["group"]
    raw_id_fields = ["group"]
    readonly_fields = ["id", "user_id", "group", "title", "next_position", "created_at"]
    ordering = ["-created_at"]
    inlines = [CheckpointInline, MessageInline]

    @admin.display(description="messages")
    def messages_link(self, obj: Conversation) -> str:
        url = reverse("admin:conversations_message_changelist") + f"?conversation__id__exact={obj.id}"
        return format_html('<a href="{}">by channel and agent</a>', url)


@admin.register(Message)
class MessageAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = [
        "seq",
        "conversation",
        "channel",
        "role",
        "agent",
        "memory_epoch",
        "session_id",
        "created_at",
    ]
    list_filter = ["channel", "role", "agent"]
    search_fields = ["=conversation__id", "=session_id", "conversation__user_id"]
    list_select_related = ["conversation", "agent"]
    raw_id_fields = ["conversation", "agent"]
    readonly_fields = ("id", "conversation", *MESSAGE_FIELDS)
    ordering = ["-created_at"]
    show_full_result_count = False
