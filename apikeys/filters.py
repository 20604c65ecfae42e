import django_filters
from django.db.models import QuerySet

from apikeys.models import Agent


class AgentFilter(django_filters.FilterSet):
    status = django_filters.ChoiceFilter(choices=Agent.Status.choices)
    capability = django_filters.CharFilter(method="filter_capability", label="Has this capability")

    class Meta:
        model = Agent
        fields = ["status"]

    def filter_capability(self, queryset: QuerySet[Agent], name: str, value: str) -> QuerySet[Agent]:
        # JSON containment is PostgreSQL-only; a portable text match on the JSON list works on both databases.
        return queryset.filter(capabilities__icontains=f'"{value}"')
