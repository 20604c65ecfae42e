"""A paginator for admin changelists over tables of millions of rows."""

from functools import cached_property

from django.core.paginator import Paginator
from django.db import connections
from django.db.models import QuerySet


class LargeTablePaginator(Paginator):
    """Never counts a big table in full.

    Unfiltered: PostgreSQL's planner estimate (``pg_class.reltuples``), which costs nothing. Filtered (or on
    SQLite): an exact count capped at ``COUNT_CAP`` rows, so a broad filter costs a bounded scan; past the cap
    the admin shows the capped number of pages, enough to page and refine the filter.
    """

    COUNT_CAP = 10_000

    @cached_property
    def count(self) -> int:
        qs = self.object_list
        if not isinstance(qs, QuerySet):
            return len(qs)
        connection = connections[qs.db]
        if connection.vendor == "postgresql" and not qs.query.where:
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT reltuples::bigint FROM pg_class WHERE oid = %s::regclass",
                    [qs.model._meta.db_table],
                )
                row = cursor.fetchone()
            if row and row[0] >= self.COUNT_CAP:
                return int(row[0])
        return qs[: self.COUNT_CAP].count()
