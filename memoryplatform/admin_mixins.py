"""Admin glue shared by the apps."""

from typing import Any

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
    shows nothing instead of Django's red cross."""
    return format_html('<span class="flag-on">{}</span>', label) if value else ""


def cut(text: str, length: int = 80) -> SafeString:
    """A long text cut to ``length`` characters, with the whole text on hover."""
    return format_html('<span title="{}">{}</span>', text, Truncator(text).chars(length))
