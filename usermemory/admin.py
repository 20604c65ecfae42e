"""Staff govern memories, policies, conflicts and GDPR requests here; every change calls the services."""

import json
from datetime import timedelta
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import Q, QuerySet
from django.db.models.functions import Coalesce
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.dateformat import format as date_format
from django.utils.formats import localize
from django.utils.html import format_html
from django.utils.http import urlencode
from django.utils.safestring import SafeString
from django.utils.text import Truncator
from django.utils.timezone import localtime

from apikeys.caller import Caller
from apikeys.models import Agent
from memoryplatform import publicids
from memoryplatform.admin_mixins import ReadOnlyAdminMixin, cut, flag
from memoryplatform.errors import ServiceError
from memoryplatform.paginator import LargeTablePaginator
from memoryplatform.replica import HEADER as READ_FROM
from memoryplatform.replica import reads_from_replica
from memoryplatform.text import ascii_int
from usermemory import selectors, services
from usermemory.admin_policy import AgentWithPolicyAdmin
from usermemory.admin_provenance import (
    EVENT_CHANGE_FIELDS,
    EVENT_ORIGIN_FIELDS,
    EventOriginColumns,
    MemoryEventInline,
    entry_provenance,
)
from usermemory.conflicts import conflict_sets_open, conflict_sets_page
from usermemory.history import EXTRACTION_SOURCE
from usermemory.models import (
    DEFAULT_ALLOWED_CATEGORIES,
    AgentMemoryPolicy,
    InsightSource,
    MemoryConflict,
    MemoryEntry,
    MemoryEvent,
    UserDataRequest,
)


def staff_caller(request: HttpRequest) -> Caller:
    return Caller.for_staff(request.user)


# --- Agents, with their whole policy (usermemory.admin_policy) -------------------------------------

admin.site.unregister(Agent)
admin.site.register(Agent, AgentWithPolicyAdmin)


# --- Memories ---------------------------------------------------------------------------------------


class StaleFilter(admin.SimpleListFilter):
    title = "stale (not accessed in)"
    parameter_name = "stale_days"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("30", "30 days"), ("90", "90 days"), ("180", "180 days"), ("365", "a year")]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        days = self.value()
        if days is None or days not in dict(self.lookups(request, None)):  # a hand-typed value: no filter
            return queryset
        cutoff = timezone.now() - timedelta(days=int(days))
        return queryset.alias(last_touch=Coalesce("last_accessed_at", "updated_at")).filter(
            last_touch__lt=cutoff
        )


class ValidityFilter(admin.SimpleListFilter):
    """Valid now (what reads return: selectors.current_q), or no longer: superseded by a Dream summary or
    past its validTo. Without a choice the list shows every entry."""

    title = "validity"
    parameter_name = "validity"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("current", "valid now"), ("superseded", "superseded or expired")]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        if self.value() == "current":
            return queryset.filter(selectors.current_q())
        if self.value() == "superseded":
            return queryset.exclude(selectors.current_q())
        return queryset


class CategoryFilter(admin.SimpleListFilter):
    """The categories agents may use (their policies' allowedCategories) and legacy properties. Listing the
    table's distinct values instead would scan every row of a big table on each changelist view."""

    title = "category"
    parameter_name = "category"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        names = {*DEFAULT_ALLOWED_CATEGORIES, services.PROPERTY_CATEGORY}
        for allowed in AgentMemoryPolicy.objects.values_list("allowed_categories", flat=True):
            names.update(c for c in allowed or [] if isinstance(c, str))
        return [(name, name) for name in sorted(names)]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        return queryset.filter(category=self.value()) if self.value() else queryset


class InsightSourceFilter(admin.SimpleListFilter):
    """The named sources of an insight, and ``extracted`` (what extraction writes); a free-text source shows
    in the list."""

    title = "source"
    parameter_name = "source"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [*InsightSource.choices, (EXTRACTION_SOURCE, "extracted from messages")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[MemoryEntry]) -> QuerySet[MemoryEntry]:
        return queryset.filter(source=self.value()) if self.value() else queryset


class CorrectValueForm(forms.Form):
    value = forms.CharField(widget=forms.Textarea(attrs={"rows": 4, "cols": 80}), strip=False)
    as_json = forms.BooleanField(
        required=False,
        label="Read as JSON",
        help_text="A number, list or object: the text is read as JSON. Unchecked: the text is the value.",
    )

    def __init__(self, *args: Any, entry: MemoryEntry, **kwargs: Any) -> None:
        is_text = isinstance(entry.value, str)
        text = entry.value if is_text else json.dumps(entry.value)
        kwargs["initial"] = {"value": text, "as_json": not is_text}
        super().__init__(*args, **kwargs)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        text = data.get("value")
        if text is None:
            return data
        if not data.get("as_json"):
            data["new_value"] = text
            return data
        try:
            data["new_value"] = json.loads(text)
        except ValueError as exc:
            self.add_error("value", f"Not JSON: {exc}.")
        return data


@admin.register(MemoryEntry)
class MemoryEntryAdmin(admin.ModelAdmin):
    # At 1366 px the user, key, value and agent take the width: category and visibility share a column,
    # source and confidence (mostly unsaid) one that is blank when they are, the time is short; a long user
    # id, key or value wraps onto a second line before it is cut (admin.css).
    list_display = [
        "user_id",
        "key_shown",
        "value_preview",
        "source_agent",
        "scope",
        "insight",
        "conflict_flag",
        "reads",
        "updated",
    ]
    list_filter = [
        "visibility",
        CategoryFilter,
        "conflicted",
        ValidityFilter,
        StaleFilter,
        InsightSourceFilter,
        "source_agent",
    ]
    # The search box: a user id exactly, or the words of the key or value text (full-text, with prefixes;
    # get_search_results). Django's own "key" search would be an ILIKE over every entry.
    search_fields = ["=user_id"]
    list_select_related = ["source_agent"]
    raw_id_fields = ["source_agent"]

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[MemoryEntry], search_term: str
    ) -> tuple[QuerySet[MemoryEntry], bool]:
        term = search_term.strip()
        if not term:
            return queryset, False
        match = selectors.fulltext_match(term)
        condition = Q(user_id=term) if match is None else Q(user_id=term) | Q(match)
        return queryset.filter(condition), False

    readonly_fields = (
        "public_id",
        "user_id",
        "key",
        "value",
        "correct_link",
        "agents_link",
        "value_text",
        "category",
        "visibility",
        "source_agent",
        "group_ids",
        "source_conversation_id",
        "conflict_flag",
        "access_count",
        "created_at",
        "updated_at",
        "observed_at",
        "last_accessed_at",
        "valid_from",
        "valid_to",
        "superseded_by",
        "value_provenance",
        "confidence",
        "source",
    )
    fields = readonly_fields
    inlines = [MemoryEventInline]
    paginator = LargeTablePaginator
    show_full_result_count = False
    list_per_page = 50
    ordering = ["-updated_at", "-id"]
    actions = ["delete_entries"]

    @admin.display(description="key", ordering="key")
    def key_shown(self, entry: MemoryEntry) -> SafeString:
        """The key in an element of its own, which admin.css lets wrap onto a second line."""
        return format_html("<span>{}</span>", entry.key)

    @admin.display(description="value")
    def value_preview(self, entry: MemoryEntry) -> SafeString:
        return cut(entry.value_text)

    @admin.display(description="category · visibility", ordering="category")
    def scope(self, entry: MemoryEntry) -> str:
        return f"{entry.category} · {entry.visibility}"

    @admin.display(description="source · confidence", empty_value="")
    def insight(self, entry: MemoryEntry) -> str:
        """Where the fact came from and how sure its writer was; blank when neither was said."""
        said = [entry.source or "", "" if entry.confidence is None else f"{entry.confidence:g}"]
        return " · ".join(s for s in said if s)

    @admin.display(description="reads", ordering="access_count")
    def reads(self, entry: MemoryEntry) -> int:
        """How often reads returned the entry (its access count)."""
        return entry.access_count

    @admin.display(description="updated", ordering="updated_at")
    def updated(self, entry: MemoryEntry) -> SafeString:
        when = localtime(entry.updated_at)
        return format_html('<span title="{}">{}</span>', localize(when), date_format(when, "Y-m-d H:i"))

    @admin.display(description="public id")
    def public_id(self, entry: MemoryEntry) -> str:
        """The id the API shows (and Dream's summaries, history and conflicts name)."""
        return str(publicids.public_str(publicids.ENTRY, entry.pk))

    @admin.display(description="provenance")
    def value_provenance(self, entry: MemoryEntry) -> SafeString:
        """Where the value came from: the trigger, extraction, messages and model of the change that wrote
        it, or a Dream summary's sources."""
        return entry_provenance(entry)

    agents_side_by_side = 12
    entries_per_agent = 200

    @admin.display(description="agents")
    def agents_link(self, entry: MemoryEntry) -> SafeString:
        url = reverse("admin:usermemory_memoryentry_agents") + "?" + urlencode({"user": entry.user_id})
        return format_html('<a href="{}" id="agents-see">What each agent sees of this user</a>', url)

    @admin.display(description="correct")
    def correct_link(self, entry: MemoryEntry) -> SafeString:
        url = reverse("admin:usermemory_memoryentry_correct", args=[entry.pk])
        return format_html('<a class="button" id="correct-value" href="{}">Correct the value</a>', url)

    def get_urls(self) -> list[URLPattern]:
        correct = self.admin_site.admin_view(self.correct_view)
        agents = self.admin_site.admin_view(self.agents_view)
        return [
            path("<int:entry_id>/correct/", correct, name="usermemory_memoryentry_correct"),
            path("agents-see/", agents, name="usermemory_memoryentry_agents"),
            *super().get_urls(),
        ]

    def agents_view(self, request: HttpRequest) -> HttpResponse:
        """One user's entries as each agent reads them, side by side: the API's own selector
        (:func:`usermemory.selectors.memory_list` for that agent's key), with the rule that admits each."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        user_id = request.GET.get("user", "").strip()
        columns = []
        if user_id:
            for agent in Agent.objects.order_by("id")[: self.agents_side_by_side]:
                groups = selectors.agent_group_ids(agent_id=agent.id)
                entries = selectors.memory_list(caller=Caller(role="agent", agent=agent), user_id=user_id)
                rows = [
                    (e, selectors.visibility_rule(entry=e, agent_id=agent.id, group_ids=groups))
                    for e in entries[: self.entries_per_agent]
                ]
                columns.append({"agent": agent, "groups": groups, "rows": rows})
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": "What each agent sees",
            "user_id": user_id,
            "columns": columns,
            "entries_per_agent": self.entries_per_agent,
        }
        return TemplateResponse(request, "admin/usermemory/agents_see.html", context)

    def correct_view(self, request: HttpRequest, entry_id: int) -> HttpResponse:
        """Staff correct a value through :func:`usermemory.services.memory_correct` (history names them)."""
        if not request.user.has_perm("usermemory.change_memoryentry"):
            raise PermissionDenied
        entry = get_object_or_404(MemoryEntry, pk=entry_id)
        form = CorrectValueForm(request.POST or None, entry=entry)
        if request.method == "POST" and form.is_valid():
            try:
                services.memory_correct(
                    caller=staff_caller(request), entry_id=entry.pk, value=form.cleaned_data["new_value"]
                )
            except ServiceError as exc:
                form.add_error("value", exc.message)
            else:
                self.message_user(request, f"Corrected {entry.user_id} / {entry.key}.", messages.SUCCESS)
                return redirect("admin:usermemory_memoryentry_change", entry.pk)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": f"Correct {entry.key}",
            "entry": entry,
            "form": form,
        }
        return TemplateResponse(request, "admin/usermemory/correct.html", context)

    @admin.display(description="conflicted", ordering="conflicted", empty_value="")
    def conflict_flag(self, entry: MemoryEntry) -> SafeString | str:
        return flag(entry.conflicted, "conflicted")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # memories are written by agents; staff resolve conflicts or erase

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return obj is None and super().has_delete_permission(request, obj)

    def get_actions(self, request: HttpRequest) -> dict[str, Any]:
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)
        return actions

    @admin.action(description="Delete selected memories (recorded in their history)", permissions=["delete"])
    def delete_entries(self, request: HttpRequest, queryset: QuerySet) -> None:
        caller = staff_caller(request)
        ids = list(queryset.values_list("id", flat=True)[:1000])
        for entry_id in ids:
            services.memory_delete(caller=caller, entry_id=entry_id)
        self.message_user(request, f"Deleted {len(ids)} memories.", messages.SUCCESS)


@admin.register(MemoryEvent)
class MemoryEventAdmin(EventOriginColumns, ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["created_at", "action", "user_id", "key", "trigger", "actor_id", "extraction", "entry_id"]
    list_filter = ["action", "actor_type"]
    search_fields = ["=user_id", "key", "actor_id"]
    readonly_fields = [
        "entry",
        "user_id",
        "key",
        *EVENT_CHANGE_FIELDS,
        "owner",
        "old_visibility",
        "old_group_ids",
        "visibility",
        "group_ids",
        "created_at",
        "observed_at",
        *EVENT_ORIGIN_FIELDS,
        "provenance",
    ]
    raw_id_fields = ["entry"]
    paginator = LargeTablePaginator
    show_full_result_count = False


# --- Conflicts --------------------------------------------------------------------------------------


def _as_listed(entry_id: int) -> str:
    """An entry as the Conflicts page lists it: its key, value and agent (its row number is shown nowhere)."""
    entry = MemoryEntry.objects.filter(pk=entry_id).only("key", "value_text", "source_agent_id").first()
    if entry is None:
        return "the chosen value"
    agent = f" (agent {entry.source_agent_id})" if entry.source_agent_id else ""
    return f"{entry.key} = {Truncator(entry.value_text).chars(80)}{agent}"


@admin.register(MemoryConflict)
class MemoryConflictAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Conflicted (user, key) sets side by side; staff pick the value to keep."""

    search_fields = ["=user_id", "key"]
    users_per_page = 25

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        if not self.has_view_or_change_permission(request):
            return redirect("admin:index")
        if request.method == "POST":
            if not request.user.has_perm("usermemory.change_memoryentry"):
                return redirect("admin:index")
            return self._settle(request)
        query = request.GET.get("q", "").strip()
        page = ascii_int(request.GET.get("p", "1"), low=1, high=999_999) or 1
        sets, has_next = conflict_sets_page(query=query, page=page, users_per_page=self.users_per_page)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": "Conflicting memories",
            "sets": sets,
            "open_conflicts": conflict_sets_open(),
            "query": query,
            "page": page,
            "has_next": has_next,
            **(extra_context or {}),
        }
        return TemplateResponse(request, "admin/usermemory/conflicts.html", context)

    def _settle(self, request: HttpRequest) -> HttpResponse:
        mode = request.POST.get("mode", "")  # nothing preselected: no value is overwritten by default
        try:
            ids = [int(i) for i in request.POST.getlist("entry")]
            keep = int(request.POST["keep"]) if mode != "dismiss" else None
            result = services.memory_settle_conflict(
                caller=staff_caller(request),
                user_id=request.POST["user_id"],
                entry_ids=ids,
                keep_entry_id=keep,
                mode=mode,
            )
        except (KeyError, ValueError):
            self.message_user(
                request, "Pick the value to keep, or mark the set not a conflict.", messages.ERROR
            )
        except ServiceError as exc:
            self.message_user(request, exc.message, messages.ERROR)
        else:
            who = f"{request.POST['user_id']} / {request.POST.get('keys', '')}"
            if mode == "dismiss":
                done = f"marked not a conflict ({result['dismissed']} entries); Dream will not flag it again"
            else:
                others = result["updated"] + result["deleted"]
                noun = "entry" if others == 1 else "entries"
                what = "now holds it" if others == 1 else "now hold it"
                fate = (
                    f"{others} other {noun} {what}" if mode == "update" else f"deleted {others} other {noun}"
                )
                done = f"kept {_as_listed(result['kept'])}; {fate}"
            self.message_user(request, f"Settled {who}: {done}.", messages.SUCCESS)
        return redirect(request.get_full_path())


# --- GDPR -------------------------------------------------------------------------------------------


class UserDataForm(forms.Form):
    user_id = forms.CharField(max_length=255, label="User id")
    confirmation = forms.CharField(
        max_length=16, required=False, label="Type CONFIRM to erase", help_text="Needed for erasure only."
    )


@admin.register(UserDataRequest)
class UserDataRequestAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Export or erase everything about one user."""

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        if not request.user.is_superuser:
            return redirect("admin:index")
        form = UserDataForm(request.POST or None)
        report = None
        if request.method == "POST" and form.is_valid():
            user_id = form.cleaned_data["user_id"]
            caller = staff_caller(request)
            if "export" in request.POST:
                with reads_from_replica() as route:  # a door of the replica's (memoryplatform.replica)
                    export = services.memory_export_user(caller=caller, user_id=user_id)
                response = JsonResponse(export, json_dumps_params={"indent": 2, "ensure_ascii": False})
                if route.on_replica or route.reason:
                    response[READ_FROM] = route.header
                response["Content-Disposition"] = f'attachment; filename="user-{user_id}.json"'
                return response
            if form.cleaned_data["confirmation"] != "CONFIRM":
                form.add_error("confirmation", "Type CONFIRM (in capitals) to erase this user's data.")
            else:
                report = services.memory_erase_user(caller=caller, user_id=user_id)
                self.message_user(request, f"Erased all data of user {user_id}.", messages.SUCCESS)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": "Export or erase a user's data (GDPR)",
            "form": form,
            "report": json.dumps(report, indent=2) if report else None,
            **(extra_context or {}),
        }
        return TemplateResponse(request, "admin/usermemory/user_data.html", context)
