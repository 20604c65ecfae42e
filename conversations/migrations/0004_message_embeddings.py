"""Message vectors (pgvector), shaped as memory entries' (usermemory 0010, which creates the extension): the
table, and its foreign key with ON DELETE CASCADE in the database, so every delete of a message (GDPR erasure,
a conversation deleted) removes its vector in the same statement. New table, no rewrite of messages: vectors
of existing messages are filled by the scheduled re-embedding or `manage.py embed --missing`."""

import django.db.models.deletion
import pgvector.django.vector
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('conversations', '0003_message_search_vector'),
        ('usermemory', '0010_entry_embeddings'),
    ]

    operations = [
        migrations.CreateModel(
            name='MessageEmbedding',
            fields=[
                ('model', models.CharField(max_length=200)),
                ('dimensions', models.PositiveIntegerField()),
                ('text_hash', models.CharField(max_length=64)),
                ('embedding', pgvector.django.vector.VectorField()),
                ('embedded_at', models.DateTimeField()),
                ('message', models.OneToOneField(db_constraint=False, on_delete=django.db.models.deletion.DO_NOTHING, primary_key=True, related_name='embedding', serialize=False, to='conversations.message')),
            ],
            options={
                'abstract': False,
            },
        ),
        migrations.RunSQL(
            sql=(
                "ALTER TABLE conversations_messageembedding ADD CONSTRAINT conversations_messageembedding_msg_fk "
                "FOREIGN KEY (message_id) REFERENCES conversations_message (id) ON DELETE CASCADE"
            ),
            reverse_sql=(
                "ALTER TABLE conversations_messageembedding DROP CONSTRAINT conversations_messageembedding_msg_fk"
            ),
        ),
    ]
