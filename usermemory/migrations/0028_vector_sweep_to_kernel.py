"""VectorSweep is the kernel's now (memoryplatform's migration 0001 renamed its table): out of usermemory's
state, the table untouched here."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("usermemory", "0027_policy_parts_moved"),
        ("memoryplatform", "0001_vector_sweep_from_usermemory"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[migrations.DeleteModel(name="VectorSweep")],
        ),
    ]
