"""MemoryEvent.entry_id becomes a reference to the entry, without a database constraint (history outlives its
entry). The column keeps its name and type, so only Django's state changes; no data moves."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("usermemory", "0002_trigram_search"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveField(model_name="memoryevent", name="entry_id"),
                migrations.AddField(
                    model_name="memoryevent",
                    name="entry",
                    field=models.ForeignKey(
                        blank=True,
                        db_constraint=False,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="events",
                        to="usermemory.memoryentry",
                    ),
                ),
            ],
            database_operations=[],
        ),
    ]
