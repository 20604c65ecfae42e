"""The record of the re-embedding passes (VectorSweep) moves from usermemory to the kernel, which alone writes
it (memoryplatform.embeddings): the table is renamed, its rows kept; usermemory's migration 0027 takes the
model out of its state."""

import django.db.models.functions.datetime
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("usermemory", "0026_observed_at"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(
                    "ALTER TABLE usermemory_vectorsweep RENAME TO memoryplatform_vectorsweep",
                    reverse_sql="ALTER TABLE memoryplatform_vectorsweep RENAME TO usermemory_vectorsweep",
                ),
            ],
            state_operations=[
                migrations.CreateModel(
                    name="VectorSweep",
                    fields=[
                        ("kind", models.CharField(max_length=63, primary_key=True, serialize=False)),
                        ("model", models.CharField(max_length=300)),
                        (
                            "completed_at",
                            models.DateTimeField(db_default=django.db.models.functions.datetime.Now()),
                        ),
                    ],
                ),
            ],
        ),
    ]
