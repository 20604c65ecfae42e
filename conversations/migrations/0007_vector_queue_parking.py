"""Poisoned texts in the vector queue (issue 44), as usermemory 0024 does for entries: the trigger function of
0005, re-queueing with the claims, the parking and its reason reset."""

from django.db import migrations, models


def queue_function(reset: str) -> str:
    return f"""
CREATE OR REPLACE FUNCTION conversations_queue_vectors() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO conversations_pendingmessagevector (message_id, queued_at, not_before)
    SELECT id, clock_timestamp(), NULL FROM new_messages WHERE channel IN ('history', 'summary')
    ON CONFLICT (message_id) DO UPDATE SET queued_at = EXCLUDED.queued_at, not_before = NULL{reset};
    IF FOUND THEN
        PERFORM pg_notify('memoryplatform_vectors', TG_TABLE_NAME);
    END IF;
    RETURN NULL;
END
$$
"""


RESET = ", attempts = 0, parked_at = NULL, last_error = ''"


class Migration(migrations.Migration):

    dependencies = [
        ('conversations', '0006_halfvec_embeddings'),
    ]

    operations = [
        migrations.AddField(
            model_name='pendingmessagevector',
            name='attempts',
            field=models.PositiveSmallIntegerField(db_default=0),
        ),
        migrations.AddField(
            model_name='pendingmessagevector',
            name='last_error',
            field=models.TextField(blank=True, db_default=''),
        ),
        migrations.AddField(
            model_name='pendingmessagevector',
            name='parked_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddIndex(
            model_name='pendingmessagevector',
            index=models.Index(condition=models.Q(('attempts__gt', 0), ('parked_at__isnull', True)), fields=['queued_at'], name='conv_pending_vector_suspect'),
        ),
        migrations.RunSQL(queue_function(RESET), reverse_sql=queue_function("")),
    ]
