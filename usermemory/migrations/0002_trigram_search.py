"""pg_trgm GIN indexes so the literal substring search (ILIKE) uses an index on PostgreSQL.

``fastupdate = off``: with the default pending list, an insert now and then pays for flushing it and stalls
for hundreds of milliseconds.
"""

from django.contrib.postgres.operations import TrigramExtension
from django.db import migrations

INDEXES = {
    "memory_key_trgm": "key",
    "memory_value_trgm": "value_text",
}


def create_indexes(apps, schema_editor):
    for name, column in INDEXES.items():
        schema_editor.execute(
            f"CREATE INDEX IF NOT EXISTS {name} ON usermemory_memoryentry "
            f"USING gin ({column} gin_trgm_ops) WITH (fastupdate = off)"
        )


def drop_indexes(apps, schema_editor):
    for name in INDEXES:
        schema_editor.execute(f"DROP INDEX IF EXISTS {name}")


class Migration(migrations.Migration):
    dependencies = [("usermemory", "0001_initial")]

    operations = [
        TrigramExtension(),
        migrations.RunPython(create_indexes, drop_indexes),
    ]
