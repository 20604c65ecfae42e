"""Issue 53: a write event's valid_to, until when its value held (a TTL or a validTo, renewed with the TTL),
so a read as of a past time leaves out what had expired by then. Each entry's last write takes the entry's
valid_to; older writes' are unknown (null: until changed)."""

import datetime

from django.db import migrations, models

BACKFILL = """UPDATE usermemory_memoryevent ev SET valid_to = e.valid_to
FROM (
    SELECT DISTINCT ON (ev2.entry_id) ev2.id, e2.valid_to
    FROM usermemory_memoryevent ev2 JOIN usermemory_memoryentry e2 ON e2.id = ev2.entry_id
    WHERE e2.valid_to IS NOT NULL AND ev2.action IN ('created', 'updated')
    ORDER BY ev2.entry_id, ev2.created_at DESC, ev2.id DESC
) e
WHERE ev.id = e.id"""


class Migration(migrations.Migration):

    dependencies = [
        ('usermemory', '0029_time_columns_in_range'),
    ]

    operations = [
        migrations.AddField(
            model_name='memoryevent',
            name='valid_to',
            field=models.DateTimeField(blank=True, help_text="A write's: until when its value holds (the entry's valid_to, renewed with its TTL); null: until changed. A read as of a later time does not show it.", null=True),
        ),
        migrations.RunSQL(BACKFILL, reverse_sql=migrations.RunSQL.noop),
        migrations.AddConstraint(
            model_name='memoryevent',
            constraint=models.CheckConstraint(condition=models.Q(('valid_to__isnull', True), models.Q(('valid_to__gte', datetime.datetime(1, 1, 2, 0, 0, tzinfo=datetime.timezone.utc)), ('valid_to__lte', datetime.datetime(9999, 12, 30, 0, 0, tzinfo=datetime.timezone.utc))), _connector='OR'), name='memory_event_valid_to_range'),
        ),
    ]
