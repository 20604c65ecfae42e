"""The tool-call log in the admin (read-only, filtered by agent, tool, success and date), the LLM spending
(read-only), and tasks (filters, and status changes through the task service)."""

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from activity import services
from activity.models import LlmSpend, Task, ToolCall
from apikeys.caller import Caller
from memoryplatform.admin_mixins import ReadOnlyAdminMixin
from memoryplatform.errors import ServiceError
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


@admin.register(LlmSpend)
class LlmSpendAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["at", "agent", "use", "cost", "settled"]
    list_filter = ["use", "settled", "agent", "at"]
    search_fields = ["=agent__id"]
    date_hierarchy = "at"
    list_select_related = ["agent"]
    raw_id_fields = ["agent"]
    readonly_fields = [f.name for f in LlmSpend._meta.fields]
    paginator = LargeTablePaginator
    show_full_result_count = False


def _set_status(status: str, label: str) -> Any:
    @admin.action(description=f"Mark selected tasks {label}")
    def action(modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet[Task]) -> None:
        caller = Caller.for_staff(request.user)
        changed, refused = 0, []
        for task_id in queryset.values_list("id", flat=True):
            try:
                services.task_update(caller=caller, task_id=task_id, status=status)
                changed += 1
            except ServiceError as exc:
                refused.append(f"#{task_id}: {exc.message}")
        if changed:
            modeladmin.message_user(request, f"{changed} task(s) marked {label}.", messages.SUCCESS)
        for reason in refused:
            modeladmin.message_user(request, reason, messages.WARNING)

    action.__name__ = f"mark_{status}"
    return action


@admin.register(Task)
class TaskAdmin(admin.ModelAdmin):
    """Tasks with filters; the status changes through the task service (a result too, for done), so its
    rules hold here too: final is final, and done with a user stores the result as a memory."""

    list_display = ["id", "title", "status", "creator", "assignee", "user_id", "created_at", "finished_at"]
    list_filter = ["status", "assignee", "creator", "created_at"]
    search_fields = ["=user_id", "title"]
    date_hierarchy = "created_at"
    list_select_related = ["creator", "assignee"]
    raw_id_fields = ["creator", "assignee", "memory_entry"]
    readonly_fields = [f.name for f in Task._meta.fields]
    paginator = LargeTablePaginator
    show_full_result_count = False
    actions = [
        _set_status(Task.Status.IN_PROGRESS, "in progress"),
        _set_status(Task.Status.FAILED, "failed"),
        _set_status(Task.Status.CANCELLED, "cancelled"),
    ]

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # an agent creates tasks: the creator is an agent

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
