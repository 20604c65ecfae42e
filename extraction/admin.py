"""Extractions in the admin: a read-only history, each with the facts the model proposed and what came of
each (added, updated, unchanged, or rejected and why), as Dream's runs show their summaries."""

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from extraction.models import Extraction, ExtractionWatermark
from memoryplatform import publicids
from memoryplatform.admin_mixins import ReadOnlyAdminMixin, dollars, flag
from usermemory.searchtext import value_as_text

_HEADER = SafeString(
    "<tr><th>operation</th><th>fact</th><th>category</th><th>confidence</th><th>sources</th>"
    "<th>entry</th><th>before / why</th></tr>"
)


def _entry_link(entry_id: int | None) -> SafeString:
    if entry_id is None:
        return SafeString("")
    url = reverse("admin:usermemory_memoryentry_change", args=[entry_id])
    return format_html('<a href="{}">{}</a>', url, entry_id)


def _before_or_why(proposal: dict) -> str:
    if "reason" in proposal:
        return str(proposal["reason"])
    if "previousValue" in proposal:
        return value_as_text(proposal["previousValue"])
    return ""


@admin.register(Extraction)
class ExtractionAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = [
        "id",
        "created_at",
        "trigger",
        "agent",
        "user_id",
        "status",
        "dry_run_flag",
        "facts",
        "cost_shown",
    ]
    list_filter = ["trigger", "status", "dry_run", "prompt_version"]
    # The search box also takes the public id a history event's provenance shows (get_search_results).
    search_fields = ["user_id", "agent__id", "conversation_id", "error"]
    list_select_related = ["agent"]
    date_hierarchy = "created_at"
    show_full_result_count = False
    readonly_fields = [
        "public_id",
        *(f.name for f in Extraction._meta.fields if f.name != "proposals"),
        "operations",
    ]
    exclude = ["proposals"]

    @admin.display(description="dry run", ordering="dry_run", empty_value="")
    def dry_run_flag(self, extraction: Extraction) -> SafeString | str:
        """Shown only for a dry run: a real run is nothing to look at (no red cross)."""
        return flag(extraction.dry_run, "dry run")

    @admin.display(description="facts", empty_value="none")
    def facts(self, extraction: Extraction) -> str:
        """What came of the proposed facts, the counts that are not zero: "2 added, 1 rejected"."""
        counts = [
            (extraction.facts_added, "added"),
            (extraction.facts_updated, "updated"),
            (extraction.facts_unchanged, "unchanged"),
            (extraction.facts_rejected, "rejected"),
        ]
        return ", ".join(f"{n} {what}" for n, what in counts if n)

    @admin.display(description="cost", ordering="cost")
    def cost_shown(self, extraction: Extraction) -> str:
        return dollars(extraction.cost)

    @admin.display(description="public id")
    def public_id(self, extraction: Extraction) -> str:
        """The id the doors show (a history event's ``provenance.extraction``)."""
        return str(publicids.public_str(publicids.EXTRACTION, extraction.pk))

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Extraction], search_term: str
    ) -> tuple[QuerySet[Extraction], bool]:
        found, duplicates = super().get_search_results(request, queryset, search_term)
        given = search_term.strip()
        pk = publicids.parse(publicids.EXTRACTION, given) if len(given) == 16 else None
        if pk is not None:
            found = found | queryset.filter(pk=pk)
        return found, duplicates

    @admin.display(description="proposals")
    def operations(self, extraction: Extraction) -> SafeString:
        """Each proposed fact and what was done with it, accepted or rejected."""
        if not extraction.proposals:
            return format_html("{}", "none")
        rows = format_html_join(
            "",
            "<tr><td>{}</td><td><code>{}</code>: {}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
            "<td>{}</td></tr>",
            (
                (
                    p["op"],
                    p["key"],
                    p["value"],
                    p["category"],
                    p["confidence"],
                    ", ".join(str(s) for s in p["sources"]),
                    _entry_link(p.get("entryId")),
                    _before_or_why(p),
                )
                for p in extraction.proposals
            ),
        )
        return format_html("<table>{}{}</table>", _HEADER, rows)


@admin.register(ExtractionWatermark)
class ExtractionWatermarkAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["conversation", "agent", "last_seq", "updated_at"]
    list_filter = ["agent"]
    search_fields = ["conversation__id", "conversation__user_id", "agent__id"]
    list_select_related = ["conversation", "agent"]
    raw_id_fields = ["conversation", "agent"]
    readonly_fields = ["conversation", "agent", "last_seq", "updated_at"]
    show_full_result_count = False
