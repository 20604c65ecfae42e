"""Dream runs in the admin: a read-only history, and a "Run Dream now" button."""

from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.http import HttpRequest, HttpResponseRedirect
from django.urls import URLPattern, path, reverse
from django.views.decorators.http import require_POST

from dream.models import DreamRun
from dream.tasks import dream_run_cycle_task
from memoryplatform.admin_mixins import ReadOnlyAdminMixin


def dream_enqueue_from_admin() -> None:
    """Send one cycle to the workers once the request's transaction commits (in process without Redis)."""
    # robust: without Redis the cycle runs in this request, and its failure (recorded on the run) must
    # not turn the redirect into a 500.
    transaction.on_commit(lambda: dream_run_cycle_task.delay(trigger=DreamRun.Trigger.ADMIN), robust=True)


@admin.register(DreamRun)
class DreamRunAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    change_list_template = "admin/dream/dreamrun/change_list.html"
    list_display = [
        "id",
        "started_at",
        "finished_at",
        "status",
        "trigger",
        "dry_run",
        "only_agent",
        "agents_processed",
        "users_processed",
        "entries_pruned",
        "contradictions_found",
    ]
    list_filter = ["status", "trigger", "dry_run"]
    search_fields = ["only_agent", "error"]
    date_hierarchy = "started_at"
    show_full_result_count = False
    readonly_fields = [f.name for f in DreamRun._meta.fields] + ["duration"]

    def get_urls(self) -> list[URLPattern]:
        run_now = self.admin_site.admin_view(require_POST(self.run_now_view))
        return [path("run-now/", run_now, name="dream_dreamrun_run_now"), *super().get_urls()]

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> Any:
        extra_context = {**(extra_context or {}), "can_run_dream": request.user.has_perm("dream.run_dream")}
        return super().changelist_view(request, extra_context)

    def run_now_view(self, request: HttpRequest) -> HttpResponseRedirect:
        if not request.user.has_perm("dream.run_dream"):
            raise PermissionDenied
        dream_enqueue_from_admin()
        messages.success(request, "A Dream cycle was queued. It appears in this list when it starts.")
        return HttpResponseRedirect(reverse("admin:dream_dreamrun_changelist"))
