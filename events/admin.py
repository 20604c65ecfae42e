"""Webhooks in the admin: subscriptions (added through the service, the secret shown once), each one's
attempts and last answer, and "send again"; the events, read-only."""

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from apikeys.caller import Caller
from events import services
from events.models import DeliveryAttempt, Event, EventType, WebhookSubscription
from memoryplatform.admin_mixins import ReadOnlyAdminMixin, cut
from memoryplatform.errors import ServiceError
from memoryplatform.paginator import LargeTablePaginator


class WebhookForm(forms.ModelForm):
    url = forms.URLField(max_length=2000, assume_scheme="https")
    event_types = forms.MultipleChoiceField(
        choices=EventType.choices,
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="None ticked: every type.",
    )

    class Meta:
        model = WebhookSubscription
        fields = ["url", "agent", "event_types", "description", "enabled"]

    def clean_url(self) -> str:
        try:
            return services.webhook_check_url(self.cleaned_data["url"])
        except ServiceError as exc:
            raise forms.ValidationError(exc.message) from exc


ATTEMPT_FIELDS = ["attempted_at", "event", "succeeded", "status", "duration_ms", "short_answer", "error"]


class AttemptInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = DeliveryAttempt
    fields = tuple(ATTEMPT_FIELDS)
    readonly_fields = ATTEMPT_FIELDS
    ordering = ["-attempted_at", "-id"]
    extra = 0
    max_num = 0
    verbose_name_plural = "attempts (newest first)"

    @admin.display(description="answer")
    def short_answer(self, attempt: DeliveryAttempt) -> str:
        return cut(attempt.answer)


@admin.register(WebhookSubscription)
class WebhookSubscriptionAdmin(admin.ModelAdmin):
    form = WebhookForm
    list_display = ["url", "agent", "enabled", "failures", "last_status", "last_attempt_at", "delivered"]
    list_filter = ["enabled", "agent"]
    search_fields = ["url", "=agent__id", "description"]
    list_select_related = ["agent"]
    raw_id_fields = ["agent"]
    readonly_fields = [
        "id",
        "disabled_reason",
        "failures",
        "next_attempt_at",
        "last_attempt_at",
        "last_status",
        "last_answer",
        "delivered",
        "created_at",
    ]
    inlines = [AttemptInline]
    actions = ["send_again"]

    def save_model(self, request: HttpRequest, obj: WebhookSubscription, form: Any, change: bool) -> None:
        caller = Caller.for_staff(request.user)
        data = form.cleaned_data
        if change:
            services.webhook_update(
                caller=caller,
                subscription_id=obj.pk,
                url=data["url"],
                event_types=data["event_types"],
                description=data["description"],
                enabled=data["enabled"],
            )
            return
        created = services.webhook_create(
            caller=caller,
            url=data["url"],
            agent_id=data["agent"].pk,
            event_types=data["event_types"],
            description=data["description"],
        )
        obj.pk = created.subscription.pk
        self.message_user(request, f"The signing secret, shown this once: {created.secret}", messages.WARNING)

    @admin.action(description="Send again: enable, clear failures, queue the next event's delivery")
    def send_again(self, request: HttpRequest, queryset: QuerySet[WebhookSubscription]) -> None:
        for subscription_id in queryset.values_list("pk", flat=True):
            services.webhook_send_again(subscription_id=subscription_id)
        self.message_user(
            request,
            f"{queryset.count()} subscription(s) queued: a worker sends the next event again now.",
            messages.SUCCESS,
        )


@admin.register(Event)
class EventAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["id", "type", "occurred_at", "user_id", "key", "visibility", "owner"]
    list_filter = ["type", "visibility"]
    search_fields = ["=user_id", "=key"]
    readonly_fields = [f.name for f in Event._meta.fields]
    paginator = LargeTablePaginator
    show_full_result_count = False
