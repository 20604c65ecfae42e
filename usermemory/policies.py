"""An agent's memory policy in parts (issue 48): usermemory's own
(:class:`usermemory.models.AgentMemoryPolicy`: caps, recall, guardrails) and one part a row for each app
above that keeps settings of its own (Dream's, extraction's, activity's), one-to-one with the agent in
the app's own table.

Each app registers its part from its ``AppConfig.ready()``, as it registers its per-user data for GDPR
(:func:`usermemory.governance.register_user_data`), so usermemory, below those apps, names none of them. The
parts are one policy at every door: :func:`usermemory.governance.policy_update` writes them in one
transaction, :func:`usermemory.selectors.policy_values` reads them as one document, the admin shows them on
the agent's page and ``memoryPolicy`` over REST keeps EDDI's shape (each part brings its fields of it).

A field name belongs to one part only, so a change is addressed by its field name alone."""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.db import models

FieldGroups = tuple[tuple[str | None, tuple[str, ...]], ...]


@dataclass(frozen=True)
class PolicyPart:
    """One app's part of an agent's policy.

    ``model`` has the agent as its primary key (a ``OneToOneField``); an agent without a row has the model's
    defaults. ``groups`` lays its fields out (the admin's fieldsets: title, fields), and every field it names
    is the part's. ``check`` raises :class:`memoryplatform.errors.BadRequest` for a row whose values do not
    hold together (before it is saved). ``rest`` is the dotted path of a function that returns the part's
    fields of ``memoryPolicy`` (name to a new DRF field, in the contract's order): a path, not an
    import, since the domain names no door (the REST layer imports it, :mod:`usermemory.api.policy`)."""

    name: str
    model: type[models.Model]
    groups: FieldGroups
    check: Callable[[Any], None] | None = None
    rest: str = ""

    @property
    def fields(self) -> tuple[str, ...]:
        return tuple(name for _, names in self.groups for name in names)


_parts: dict[str, PolicyPart] = {}


def register_policy_part(part: PolicyPart) -> None:
    """Add an app's part (from its ``AppConfig.ready()``; again with the same name replaces it)."""
    others = {field for other in _parts.values() if other.name != part.name for field in other.fields}
    shared = others & set(part.fields)
    if shared:
        raise ImproperlyConfigured(f"Policy part {part.name!r} names fields of another: {sorted(shared)}.")
    model_fields = {field.name for field in part.model._meta.get_fields()}
    unknown = set(part.fields) - model_fields
    if unknown:
        raise ImproperlyConfigured(
            f"Policy part {part.name!r} names no field {sorted(unknown)} of its model."
        )
    _parts[part.name] = part


def policy_parts() -> tuple[PolicyPart, ...]:
    """The registered parts, usermemory's first, then in the order of INSTALLED_APPS."""
    return tuple(_parts.values())


def policy_fields() -> tuple[str, ...]:
    """Every field of the policy, in the parts' order."""
    return tuple(name for part in policy_parts() for name in part.fields)
