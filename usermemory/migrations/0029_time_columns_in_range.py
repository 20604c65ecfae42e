"""Issue 53: the time columns a caller sets (an entry's observed_at and valid_to, a write event's
observed_at) held from 0001-01-02 to 9999-12-30 UTC by CHECK constraints (usermemory.models.in_time_range),
so no stored time can fail a read. A row out of that range (an MCP write once stored 1 BC) is first moved to
the nearest end of it."""

import datetime

from django.db import migrations, models

EARLIEST, LATEST = "'0001-01-02 00:00:00+00'", "'9999-12-30 00:00:00+00'"


def _clamp(table: str, column: str) -> migrations.RunSQL:
    return migrations.RunSQL(
        f"UPDATE {table} SET {column} = LEAST(GREATEST({column}, {EARLIEST}), {LATEST}) "
        f"WHERE {column} < {EARLIEST} OR {column} > {LATEST}",
        reverse_sql=migrations.RunSQL.noop,
    )


def _range(column: str, *, nullable: bool) -> models.Q:
    within = models.Q(
        (f"{column}__gte", datetime.datetime(1, 1, 2, 0, 0, tzinfo=datetime.timezone.utc)),
        (f"{column}__lte", datetime.datetime(9999, 12, 30, 0, 0, tzinfo=datetime.timezone.utc)),
    )
    return models.Q((f"{column}__isnull", True), within, _connector="OR") if nullable else within


class Migration(migrations.Migration):

    dependencies = [
        ('apikeys', '0002_auth_change_notify'),
        ('usermemory', '0028_vector_sweep_to_kernel'),
    ]

    operations = [
        _clamp("usermemory_memoryentry", "observed_at"),
        _clamp("usermemory_memoryentry", "valid_to"),
        _clamp("usermemory_memoryevent", "observed_at"),
        migrations.AddConstraint(
            model_name='memoryentry',
            constraint=models.CheckConstraint(
                condition=_range("observed_at", nullable=False), name='memory_observed_at_range'
            ),
        ),
        migrations.AddConstraint(
            model_name='memoryentry',
            constraint=models.CheckConstraint(
                condition=_range("valid_to", nullable=True), name='memory_valid_to_range'
            ),
        ),
        migrations.AddConstraint(
            model_name='memoryevent',
            constraint=models.CheckConstraint(
                condition=_range("observed_at", nullable=True), name='memory_event_observed_at_range'
            ),
        ),
    ]
