"""Admin glue shared by the apps."""

from decimal import Decimal
from typing import Any

from django import forms
from django.http import HttpRequest
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.text import Truncator


class ReadOnlyAdminMixin:
    """A ModelAdmin or inline that shows records and never adds, changes or deletes them."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


def flag(value: bool, label: str) -> SafeString | str:
    """A flag shown only when set: a list's False that is nothing wrong ("not conflicted", "not a dry run")
    shows nothing instead of Django's red cross (its column's ``admin.display`` sets ``empty_value=""``, or
    the list shows "-")."""
    return format_html('<span class="flag-on">{}</span>', label) if value else ""


def dollars(amount: Decimal | float | int | None) -> str:
    """A cost in full: every stored decimal (six), trailing zeros dropped down to cents: ``$0.104213``,
    ``$0.12``, ``$0.00``."""
    if amount is None:
        return ""
    text = f"{Decimal(str(amount)):.6f}".rstrip("0")
    whole, _, cents = text.partition(".")
    return f"${whole}.{cents.ljust(2, '0')}"


def cut(text: str, length: int = 80) -> SafeString:
    """A long text cut to ``length`` characters, with the whole text on hover."""
    return format_html('<span title="{}">{}</span>', text, Truncator(text).chars(length))


class StringListField(forms.CharField):
    """A JSON list of strings edited as text, one item a line (blank lines and surrounding spaces dropped),
    instead of raw JSON."""

    widget = forms.Textarea(attrs={"rows": 4, "cols": 40})

    def prepare_value(self, value: Any) -> str:
        if isinstance(value, list | tuple):
            return "\n".join(str(item) for item in value)
        return "" if value is None else str(value)

    def to_python(self, value: Any) -> list[str]:  # type: ignore[override]  # a list, not the text
        if isinstance(value, list):
            return [str(item).strip() for item in value if str(item).strip()]
        text = super().to_python(value) or ""
        return [line.strip() for line in text.splitlines() if line.strip()]
