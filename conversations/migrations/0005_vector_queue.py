"""The queue of history and case-log messages waiting for their vector (issue 31), as usermemory 0020 does for
entries."""

import django.db.models.deletion
import django.db.models.functions.datetime
from django.db import migrations, models


FOREIGN_KEY = (
    "ALTER TABLE conversations_pendingmessagevector ADD CONSTRAINT conversations_pendingmessagevector_msg_fk "
    "FOREIGN KEY (message_id) REFERENCES conversations_message (id) ON DELETE CASCADE"
)

# Queue the history and case-log messages a statement writes (messages are append-only), in the write's own
# transaction, and wake the consumers as it commits: one statement-level trigger over the statement's new rows.
# The memory channel gets no vector (conversations.store).
QUEUE_FUNCTION = """
CREATE FUNCTION conversations_queue_vectors() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO conversations_pendingmessagevector (message_id, queued_at, not_before)
    SELECT id, clock_timestamp(), NULL FROM new_messages WHERE channel IN ('history', 'summary')
    ON CONFLICT (message_id) DO UPDATE SET queued_at = EXCLUDED.queued_at, not_before = NULL;
    IF FOUND THEN
        PERFORM pg_notify('memoryplatform_vectors', TG_TABLE_NAME);
    END IF;
    RETURN NULL;
END
$$
"""

TRIGGER = (
    "CREATE TRIGGER conversations_message_queue_vector AFTER INSERT ON conversations_message "
    "REFERENCING NEW TABLE AS new_messages FOR EACH STATEMENT EXECUTE FUNCTION conversations_queue_vectors()"
)

BACKFILL = (
    "INSERT INTO conversations_pendingmessagevector (message_id, queued_at) "
    "SELECT m.id, m.created_at FROM conversations_message m WHERE m.channel IN ('history', 'summary') "
    "AND NOT EXISTS (SELECT 1 FROM conversations_messageembedding v WHERE v.message_id = m.id)"
)

DROP = [
    "DROP TRIGGER IF EXISTS conversations_message_queue_vector ON conversations_message",
    "DROP FUNCTION IF EXISTS conversations_queue_vectors()",
]


class Migration(migrations.Migration):

    dependencies = [
        ('conversations', '0004_message_embeddings'),
    ]

    operations = [
        migrations.CreateModel(
            name='PendingMessageVector',
            fields=[
                ('queued_at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
                ('not_before', models.DateTimeField(blank=True, null=True)),
                ('message', models.OneToOneField(db_constraint=False, on_delete=django.db.models.deletion.DO_NOTHING, primary_key=True, related_name='pending_vector', serialize=False, to='conversations.message')),
            ],
            options={
                'indexes': [models.Index(fields=['queued_at'], name='conv_pending_vector_queued')],
            },
        ),
        migrations.RunSQL(sql=FOREIGN_KEY, reverse_sql=migrations.RunSQL.noop),
        migrations.RunSQL(sql=[QUEUE_FUNCTION, TRIGGER], reverse_sql=DROP),
        migrations.RunSQL(sql=BACKFILL, reverse_sql=migrations.RunSQL.noop),
    ]
