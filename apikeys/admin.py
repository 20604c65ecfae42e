"""Staff govern agents, groups and API keys here. Every save and action calls apikeys.services."""

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.auth.models import Group
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone

from apikeys import services
from apikeys.models import Agent, AgentGroup, ApiKey
from memoryplatform.admin_mixins import StringListField
from memoryplatform.errors import ServiceError

NEW_KEY_SESSION = "apikeys_new_key"  # the key made by the last add, until its page shows it


def _service_error_to_form(form: forms.BaseForm, exc: ServiceError) -> None:
    field = next((f for f in form.fields if exc.message.startswith(f"{f}:")), None)
    form.add_error(field, exc.message)


class ApiKeyInline(admin.TabularInline):
    model = ApiKey
    extra = 0
    can_delete = False
    readonly_fields = ("prefix", "role", "label", "created_at", "last_used_at", "expires_at", "revoked_at")
    fields = readonly_fields
    show_change_link = True

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class AgentForm(forms.ModelForm):
    # Check boxes: the label sits beside them, and an agent is in a handful of groups.
    groups = forms.ModelMultipleChoiceField(
        queryset=AgentGroup.objects.all(),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label="Agent groups",
        help_text="The agent groups it belongs to (group memories). Not Django's staff permission groups.",
    )
    capabilities = StringListField(required=False, help_text="One capability a line, e.g. chat.")

    class Meta:
        model = Agent
        fields = ["id", "display_name", "capabilities", "model", "status"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.fields["groups"].initial = list(self.instance.groups.values_list("id", flat=True))


@admin.register(Agent)
class AgentAdmin(admin.ModelAdmin):
    form = AgentForm
    list_display = ["id", "display_name", "status", "model", "last_active_at", "created_at"]
    list_filter = ["status"]
    search_fields = ["id", "display_name"]
    readonly_fields = ["last_active_at", "created_at", "updated_at"]
    inlines = [ApiKeyInline]

    def get_readonly_fields(self, request: HttpRequest, obj: Agent | None = None) -> list[str]:
        return [*self.readonly_fields, "id"] if obj else list(self.readonly_fields)

    def save_model(self, request: HttpRequest, obj: Agent, form: Any, change: bool) -> None:
        values = {name: form.cleaned_data[name] for name in services.AGENT_EDITABLE_FIELDS}
        if change:
            services.agent_update(agent_id=obj.id, **values)
        else:
            created = services.agent_create(agent_id=form.cleaned_data["id"], **values)
            obj.pk = created.pk
            obj.created_at, obj.updated_at = created.created_at, created.updated_at
        obj._state.adding = False

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        services.agent_set_groups(
            agent_id=form.instance.id, group_ids=[g.id for g in form.cleaned_data["groups"]]
        )
        for formset in formsets:
            self.save_formset(request, form, formset, change=change)


# Django's own groups hold staff permissions, not agents; beside "Agent groups" they read as the same thing.
# Staff permissions are set on each user's page.
admin.site.unregister(Group)


@admin.register(AgentGroup)
class AgentGroupAdmin(admin.ModelAdmin):
    list_display = ["id", "name", "member_count", "created_at"]
    list_filter = ["created_at"]
    search_fields = ["id", "name", "members__id"]
    readonly_fields = ["created_at"]
    filter_horizontal = ["members"]

    @admin.display(description="members")
    def member_count(self, group: AgentGroup) -> int:
        return group.members.count()


class ApiKeyCreateForm(forms.ModelForm):
    class Meta:
        model = ApiKey
        fields = ["role", "agent", "label", "expires_at"]
        help_texts = {
            "role": "agent: acts as one agent; viewer: reads everything; admin: everything, GDPR included.",
            "agent": "The agent an agent key acts as (its id). Leave empty for a viewer or admin key.",
            "label": "Where the key is used, for you to recognise it later (e.g. prod, CI).",
            "expires_at": "Optional, in the future (UTC). Empty: the key lives until revoked.",
        }

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        if "role" not in data:  # no role, or not one of the choices: the field's own error says so, once
            return data
        agent = data.get("agent")
        try:
            services.apikey_check_options(
                role=data.get("role", ""),
                agent_id=agent.id if agent else None,
                expires_at=data.get("expires_at"),
            )
        except ServiceError as exc:
            # On its field, which keeps the model's own check of the same rule from adding a second error.
            text = exc.message
            field = "agent" if " agent" in text else ("expires_at" if "expires_at" in text else None)
            if field is None:
                _service_error_to_form(self, exc)
            else:
                self.add_error(field, text)
        return data


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    """Keys: made with the raw key shown once on the next page; revoked by an action that asks first."""

    list_display = [
        "prefix",
        "role",
        "agent",
        "label",
        "created_at",
        "last_used_at",
        "expires_at",
        "revoked_at",
    ]
    list_filter = ["role", ("revoked_at", admin.EmptyFieldListFilter), "expires_at"]
    search_fields = ["prefix", "label", "agent__id"]
    list_select_related = ["agent"]
    raw_id_fields = ["agent"]
    readonly_fields = [
        "prefix",
        "role",
        "agent",
        "created_by",
        "created_at",
        "last_used_at",
        "expires_at",
        "revoked_at",
    ]
    actions = ["revoke_keys"]

    def get_form(
        self, request: HttpRequest, obj: ApiKey | None = None, change: bool = False, **kwargs: Any
    ) -> type[forms.ModelForm]:
        if obj is None:
            kwargs["form"] = ApiKeyCreateForm
        return super().get_form(request, obj, change=change, **kwargs)

    def get_fields(self, request: HttpRequest, obj: ApiKey | None = None) -> tuple[str, ...]:
        if obj is None:
            return ("role", "agent", "label", "expires_at")
        return (
            "prefix",
            "role",
            "agent",
            "label",
            "created_by",
            "created_at",
            "last_used_at",
            "expires_at",
            "revoked_at",
        )

    def get_readonly_fields(self, request: HttpRequest, obj: ApiKey | None = None) -> list[str]:
        return list(self.readonly_fields) if obj else []

    def has_delete_permission(self, request: HttpRequest, obj: ApiKey | None = None) -> bool:
        return False  # keys are revoked, never deleted, so their use stays on record

    def get_actions(self, request: HttpRequest) -> dict[str, Any]:
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)
        return actions

    def save_model(self, request: HttpRequest, obj: ApiKey, form: Any, change: bool) -> None:
        if change:
            obj.save(update_fields=["label"])
            return
        key, raw_key = services.apikey_create(
            role=obj.role,
            agent_id=obj.agent_id,
            label=obj.label,
            expires_at=obj.expires_at,
            created_by=request.user,
        )
        for field in ApiKey._meta.concrete_fields:
            setattr(obj, field.attname, getattr(key, field.attname))
        obj._state.adding = False
        # Post-redirect-get: the raw key waits in the session for the one page that shows it, which takes it
        # out; a reload of that page (or of the form's POST, which the redirect replaced) mints nothing.
        request.session[NEW_KEY_SESSION] = {"id": key.pk, "raw": raw_key}

    def response_add(
        self, request: HttpRequest, obj: ApiKey, post_url_continue: str | None = None
    ) -> HttpResponse:
        if request.session.get(NEW_KEY_SESSION, {}).get("id") != obj.pk:
            return super().response_add(request, obj, post_url_continue)
        return HttpResponseRedirect(reverse("admin:apikeys_apikey_created", args=[obj.pk]))

    def get_urls(self) -> list[URLPattern]:
        created = self.admin_site.admin_view(self.created_view)
        return [path("<int:key_id>/created/", created, name="apikeys_apikey_created"), *super().get_urls()]

    def created_view(self, request: HttpRequest, key_id: int) -> HttpResponse:
        """The new key, once: taken out of the session as it is shown. Later: its page, with the prefix."""
        new = request.session.get(NEW_KEY_SESSION)
        key = ApiKey.objects.select_related("agent").filter(pk=key_id).first()
        if key is None or not new or new.get("id") != key_id:
            messages.warning(request, "A new key is shown once, and this one was. Here is its prefix.")
            target = "admin:apikeys_apikey_change" if key else "admin:apikeys_apikey_changelist"
            return HttpResponseRedirect(reverse(target, args=[key_id] if key else []))
        del request.session[NEW_KEY_SESSION]
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "key": key,
            "raw_key": new["raw"],
            "title": f"API key {key.prefix} created",
        }
        response = TemplateResponse(request, "admin/apikeys/apikey/created.html", context)
        response["Cache-Control"] = "no-store"
        return response

    @admin.action(description="Revoke selected API keys")
    def revoke_keys(self, request: HttpRequest, queryset: Any) -> HttpResponse | None:
        live = queryset.filter(revoked_at__isnull=True)
        if request.POST.get("confirm") == "yes":
            revoked = 0
            for key in live:
                try:
                    services.apikey_revoke(prefix=key.prefix)
                    revoked += 1
                except ServiceError as exc:
                    self.message_user(request, exc.message, messages.WARNING)
            self.message_user(request, f"Revoked {revoked} API key(s).", messages.SUCCESS)
            return None
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "keys": live,
            "action_checkbox_name": ACTION_CHECKBOX_NAME,
            "title": "Revoke API keys?",
            "now": timezone.now(),
        }
        return TemplateResponse(request, "admin/apikeys/apikey/revoke_confirmation.html", context)
