"""The events' retention reads them by time (``events.prune``): an index on ``occurred_at``, built without
holding back the writers (CONCURRENTLY, outside a transaction)."""

from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("events", "0002_outbox_trigger_on_history"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="event",
            index=models.Index(fields=["occurred_at"], name="events_event_occurred_idx"),
        ),
    ]
