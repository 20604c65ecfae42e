"""Dream runs in the admin: a read-only history with each run's summaries as a diff, a "Run Dream now" button,
and staff approval of a run's pending summaries."""

import json
from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponseRedirect
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.views.decorators.http import require_POST

from dream.models import DreamRun
from dream.selectors import summary_diff
from dream.services import approve_run
from dream.tasks import dream_request_cycle
from memoryplatform import publicids
from memoryplatform.admin_mixins import ReadOnlyAdminMixin, dollars, flag
from usermemory.conflicts import conflict_sets_open
from usermemory.models import MemoryEntry
from usermemory.searchtext import value_as_text


def _table(value: Any, depth: int = 0) -> SafeString:
    if isinstance(value, SafeString):
        return value
    if isinstance(value, dict) and value and depth < 3:
        rows = format_html_join(
            "", "<tr><th>{}</th><td>{}</td></tr>", ((k, _table(v, depth + 1)) for k, v in value.items())
        )
        return format_html('<table class="details-table">{}</table>', rows)
    if value in ({}, [], "", None):
        return format_html("{}", "—")
    return format_html(
        "<code>{}</code>", value if isinstance(value, str | int | float) else json.dumps(value)
    )


def _pairs(pairs: list[Any]) -> SafeString:
    """A run's pairs by meaning (``[entry, entry]``), each side linked to its entry and named by user and
    key as the entry pages and the Conflicts page show them; an entry gone since by its public id."""
    ids = [i for pair in pairs if isinstance(pair, list) for i in pair if isinstance(i, int)]
    named = {e.id: e for e in MemoryEntry.objects.filter(id__in=ids).only("id", "user_id", "key")}

    def side(entry_id: Any) -> SafeString:
        if not isinstance(entry_id, int):
            return format_html("<code>{}</code>", entry_id)
        entry = named.get(entry_id)
        if entry is None:
            return format_html("{} (gone)", publicids.public_str(publicids.ENTRY, entry_id))
        url = reverse("admin:usermemory_memoryentry_change", args=[entry_id])
        return format_html('<a href="{}"><code>{}</code></a>', url, entry.key)

    rows = []
    for pair in pairs:
        if not isinstance(pair, list) or len(pair) != 2:
            continue
        known = [named[i] for i in pair if isinstance(i, int) and i in named]
        user = format_html("{}: ", known[0].user_id) if known else ""
        rows.append(format_html("<li>{}{} &harr; {}</li>", user, side(pair[0]), side(pair[1])))
    return format_html('<ul class="meaning-pairs">{}</ul>', SafeString("".join(rows)))


@admin.register(DreamRun)
class DreamRunAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    change_list_template = "admin/dream/dreamrun/change_list.html"
    change_form_template = "admin/dream/dreamrun/change_form.html"
    list_display = [
        "id",
        "started_at",
        "status",
        "dry_run_flag",
        "agents_processed",
        "users_processed",
        "entries_pruned",
        "sets_flagged",
        "entries_summarized",
        "llm_cost_shown",
    ]  # trigger and approval: filters, and on each run's page
    list_filter = ["status", "trigger", "dry_run", "approval"]
    search_fields = ["only_agent", "error"]
    date_hierarchy = "started_at"
    show_full_result_count = False
    # The details as a table, dry run as a flag (no red cross for a real run).
    exclude = ["details", "dry_run"]
    readonly_fields = [f.name for f in DreamRun._meta.fields if f.name not in ("details", "dry_run")] + [
        "dry_run_flag",
        "details_table",
        "duration",
        "summaries",
    ]

    @admin.display(description="details")
    def details_table(self, run: DreamRun) -> SafeString:
        """The run's details as a table: one row a section, a nested section as its own table; the pairs
        of entries whose keys mean the same as links to each entry, by user and key."""
        details = dict(run.details or {})
        meaning = details.get("meaning")
        if isinstance(meaning, dict) and meaning.get("pairs"):
            details["meaning"] = {**meaning, "pairs": _pairs(meaning["pairs"])}
        return _table(details)

    @admin.display(description="sets flagged", ordering="contradictions_found")
    def sets_flagged(self, run: DreamRun) -> int:
        """Conflict sets the run newly flagged, counted as the Conflicts page counts sets (what is open now
        is on top of the list: :func:`usermemory.conflicts.conflict_sets_open`)."""
        return run.contradictions_found

    @admin.display(description="LLM cost", ordering="llm_cost")
    def llm_cost_shown(self, run: DreamRun) -> str:
        return dollars(run.llm_cost)

    @admin.display(description="dry run", ordering="dry_run", empty_value="")
    def dry_run_flag(self, run: DreamRun) -> SafeString | str:
        return flag(run.dry_run, "dry run")

    @admin.display(description="summaries (diff)")
    def summaries(self, run: DreamRun) -> SafeString:
        """Each summary's text and the entries it supersedes (a dry run: would; pending: once approved)."""
        diff = summary_diff(run=run)
        if not diff:
            return format_html("{}", "none")
        rows = []
        for change in diff:
            state = (
                "applied"
                if change["applied"]
                else ("pending approval" if change["pending"] else "not applied")
            )
            old = format_html_join(
                "",
                "<li>[{}] <code>{}</code>: {}</li>",
                ((o["id"], o["key"], value_as_text(o["value"])) for o in change["supersedes"]),
            )
            rows.append(
                format_html(
                    "<tr><td>{}</td><td><code>{}</code>: {}</td><td><ul>{}</ul></td><td>{}</td></tr>",
                    change["userId"],
                    change["key"],
                    change["value"],
                    old,
                    state,
                )
            )
        header = "<tr><th>user</th><th>summary</th><th>supersedes</th><th></th></tr>"
        return format_html("<table>{}{}</table>", SafeString(header), SafeString("".join(rows)))

    def get_urls(self) -> list[URLPattern]:
        run_now = self.admin_site.admin_view(require_POST(self.run_now_view))
        approve = self.admin_site.admin_view(require_POST(self.approve_view))
        return [
            path("run-now/", run_now, name="dream_dreamrun_run_now"),
            path("<int:run_id>/approve/", approve, name="dream_dreamrun_approve"),
            *super().get_urls(),
        ]

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> Any:
        pending = DreamRun.objects.filter(pk=object_id, approval=DreamRun.Approval.PENDING).exists()
        can = pending and request.user.has_perm("dream.run_dream")
        extra_context = {**(extra_context or {}), "can_approve_summaries": can}
        return super().change_view(request, object_id, form_url, extra_context)

    def approve_view(self, request: HttpRequest, run_id: int) -> HttpResponseRedirect:
        """Staff's decision on a run's pending summaries: approve writes them, reject drops them."""
        if not request.user.has_perm("dream.run_dream"):
            raise PermissionDenied
        approve = request.POST.get("decision") == "approve"
        pending = DreamRun.objects.filter(pk=run_id, approval=DreamRun.Approval.PENDING).exists()
        superseded = approve_run(run_id=run_id, approve=approve)
        if not pending:
            messages.warning(request, "This run has no summaries waiting for approval.")
        elif approve:
            messages.success(request, f"Summaries written: {superseded} entries superseded.")
        else:
            messages.success(request, "Summaries rejected: nothing was written.")
        return HttpResponseRedirect(reverse("admin:dream_dreamrun_change", args=[run_id]))

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> Any:
        extra_context = {
            **(extra_context or {}),
            "can_run_dream": request.user.has_perm("dream.run_dream"),
            "open_conflicts": conflict_sets_open(),
        }
        return super().changelist_view(request, extra_context)

    def run_now_view(self, request: HttpRequest) -> HttpResponseRedirect:
        if not request.user.has_perm("dream.run_dream"):
            raise PermissionDenied
        if dream_request_cycle():
            messages.success(
                request, "A Dream cycle was queued. It appears in this list when a worker starts it."
            )
        else:
            messages.error(
                request,
                "The broker did not take the cycle (is Redis, or the database, reachable?). Try again, "
                "or run `manage.py dream`.",
            )
        return HttpResponseRedirect(reverse("admin:dream_dreamrun_changelist"))
