"""An agent's whole policy on its admin page: one inline a registered part (:mod:`usermemory.policies`), each
part's check a form error, every save through the policy service."""

import copy
import functools
from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest

from apikeys.admin import AgentAdmin
from memoryplatform.admin_mixins import StringListField
from memoryplatform.errors import ServiceError
from usermemory import services
from usermemory.governance import MEMORY_POLICY
from usermemory.models import AgentMemoryPolicy
from usermemory.policies import PolicyPart, policy_parts


class PolicyPartForm(forms.ModelForm):
    """One part of an agent's policy (:mod:`usermemory.policies`). The part's check runs as the form's own,
    so values that do not hold together are a form error, not a refusal at save."""

    part: PolicyPart

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        candidate = copy.copy(self.instance)
        for name, value in cleaned.items():
            setattr(candidate, name, value)
        if self.part.check is not None:
            try:
                self.part.check(candidate)
            except ServiceError as exc:
                raise forms.ValidationError(exc.message) from exc
        return cleaned


class MemoryPolicyForm(PolicyPartForm):
    part = MEMORY_POLICY
    allowed_categories = StringListField(
        required=False, help_text="One category a line; agents may write only these."
    )

    class Meta:
        model = AgentMemoryPolicy
        fields = list(MEMORY_POLICY.fields)


def _form_of(part: PolicyPart) -> type[PolicyPartForm]:
    if part is MEMORY_POLICY:
        return MemoryPolicyForm
    meta = type("Meta", (), {"model": part.model, "fields": list(part.fields)})
    return type(f"{part.model.__name__}Form", (PolicyPartForm,), {"part": part, "Meta": meta})


@functools.cache
def policy_inlines() -> tuple[type[admin.StackedInline], ...]:
    """One inline a registered policy part, its fields in the part's groups (Dream's pass by pass). Made on
    first use: the admin modules load before the apps above usermemory register their parts."""
    return tuple(
        type(
            f"{part.model.__name__}Inline",
            (admin.StackedInline,),
            {
                "model": part.model,
                "form": _form_of(part),
                "can_delete": False,
                "extra": 1,
                "max_num": 1,
                "fieldsets": [(title, {"fields": list(names)}) for title, names in part.groups],
            },
        )
        for part in policy_parts()
    )


class AgentWithPolicyAdmin(AgentAdmin):
    """An agent with its whole policy: one inline a part. Saving goes through the policy service; the
    admin's change view is one transaction, so every part is written or none."""

    def get_inlines(self, request: HttpRequest, obj: Any) -> list[type[admin.options.InlineModelAdmin]]:
        return [*policy_inlines(), *super().get_inlines(request, obj)]

    def save_formset(self, request: HttpRequest, form: Any, formset: Any, change: bool) -> None:
        part = next((p for p in policy_parts() if p.model is formset.model), None)
        if part is None:
            super().save_formset(request, form, formset, change)
            return
        for policy_form in formset.forms:
            if policy_form.has_changed():
                changes = {
                    name: policy_form.cleaned_data[name]
                    for name in part.fields
                    if name in policy_form.cleaned_data
                }
                services.policy_update(agent_id=form.instance.id, **changes)
        # The service saved the policy; tell the admin's change message what happened.
        formset.new_objects, formset.changed_objects, formset.deleted_objects = [], [], []
