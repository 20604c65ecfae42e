"""The tool-call log in the admin: read-only, filtered by agent, tool, success and date."""

from django.contrib import admin

from activity.models import ToolCall
from memoryplatform.admin_mixins import ReadOnlyAdminMixin
from memoryplatform.paginator import LargeTablePaginator


@admin.register(ToolCall)
class ToolCallAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["created_at", "agent", "tool", "success", "duration_ms", "via", "task_id"]
    list_filter = ["success", "via", "agent", "created_at"]
    search_fields = ["=tool", "=task_id", "=agent__id"]
    date_hierarchy = "created_at"
    list_select_related = ["agent"]
    raw_id_fields = ["agent"]
    readonly_fields = [f.name for f in ToolCall._meta.fields]
    paginator = LargeTablePaginator
    show_full_result_count = False
