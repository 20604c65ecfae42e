"""Template filters of the project's admin pages."""

from decimal import Decimal

from django import template

from memoryplatform.admin_mixins import dollars as dollars_text

register = template.Library()


@register.filter
def dollars(amount: Decimal | float | int | None) -> str:
    """A cost in full, as the admin's lists show it (``$0.104213``)."""
    return dollars_text(amount)
