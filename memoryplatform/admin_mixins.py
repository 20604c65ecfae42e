"""Admin glue shared by the apps."""

from typing import Any

from django.http import HttpRequest


class ReadOnlyAdminMixin:
    """A ModelAdmin or inline that shows records and never adds, changes or deletes them."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
