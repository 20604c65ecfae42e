"""A paginator for admin changelists over tables of millions of rows."""

from functools import cached_property

from django.core.paginator import Paginator
from django.db.models import QuerySet

from memoryplatform import store


class LargeTablePaginator(Paginator):
    """Never counts a big table in full.

    Unfiltered: PostgreSQL's planner estimate (``pg_class.reltuples``), which costs nothing. Filtered (or a
    small table): an exact count capped at ``COUNT_CAP`` rows, so a broad filter costs a bounded scan; past
    the cap the admin shows the capped number of pages, enough to page and refine the filter.
    """

    COUNT_CAP = 10_000

    @cached_property
    def count(self) -> int:
        qs = self.object_list
        if not isinstance(qs, QuerySet):
            return len(qs)
        if not qs.query.where:
            estimate = store.table_estimate(table=qs.model._meta.db_table, using=qs.db)
            if estimate is not None and estimate >= self.COUNT_CAP:
                return estimate
        return qs[: self.COUNT_CAP].count()
