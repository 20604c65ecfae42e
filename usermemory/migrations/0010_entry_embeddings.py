"""Entry vectors (pgvector): the extension, the table, and its foreign key with ON DELETE CASCADE in the
database, so every delete of an entry (the ORM's and the stores' raw ones) removes its vector."""

import django.db.models.deletion
import pgvector.django.vector
from pgvector.django import VectorExtension
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('usermemory', '0009_search_without_trigrams'),
    ]

    operations = [
        VectorExtension(),
        migrations.CreateModel(
            name='EntryEmbedding',
            fields=[
                ('model', models.CharField(max_length=200)),
                ('dimensions', models.PositiveIntegerField()),
                ('text_hash', models.CharField(max_length=64)),
                ('embedding', pgvector.django.vector.VectorField()),
                ('embedded_at', models.DateTimeField()),
                ('entry', models.OneToOneField(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name='embedding', serialize=False, to='usermemory.memoryentry')),
            ],
            options={
                'abstract': False,
            },
        ),
        migrations.RunSQL(
            sql=(
                "ALTER TABLE usermemory_entryembedding ADD CONSTRAINT usermemory_entryembedding_entry_fk "
                "FOREIGN KEY (entry_id) REFERENCES usermemory_memoryentry (id) ON DELETE CASCADE"
            ),
            reverse_sql="ALTER TABLE usermemory_entryembedding DROP CONSTRAINT usermemory_entryembedding_entry_fk",
        ),
    ]
