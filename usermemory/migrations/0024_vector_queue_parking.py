"""Poisoned texts in the vector queue (issue 44): a row counts the claims that never came back (the consumer
died or hung while embedding it), and one that reaches EMBEDDINGS_MAX_ATTEMPTS is parked with why
(memoryplatform/embeddings/store.py). A text written anew is a new try: the triggers reset the three."""

from django.db import migrations, models


def queue_functions(reset: str) -> list[str]:
    """usermemory 0020's two trigger functions, re-queueing with ``reset`` added to the conflict's update."""
    return [
        f"""
CREATE OR REPLACE FUNCTION usermemory_queue_new_vectors() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO usermemory_pendingentryvector (entry_id, queued_at, not_before)
    SELECT id, clock_timestamp(), NULL FROM new_entries
    ON CONFLICT (entry_id) DO UPDATE SET queued_at = EXCLUDED.queued_at, not_before = NULL{reset};
    IF FOUND THEN
        PERFORM pg_notify('memoryplatform_vectors', TG_TABLE_NAME);
    END IF;
    RETURN NULL;
END
$$
""",
        f"""
CREATE OR REPLACE FUNCTION usermemory_queue_vector() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO usermemory_pendingentryvector (entry_id, queued_at, not_before)
    VALUES (NEW.id, clock_timestamp(), NULL)
    ON CONFLICT (entry_id) DO UPDATE SET queued_at = EXCLUDED.queued_at, not_before = NULL{reset};
    PERFORM pg_notify('memoryplatform_vectors', TG_TABLE_NAME);
    RETURN NULL;
END
$$
""",
    ]


RESET = ", attempts = 0, parked_at = NULL, last_error = ''"


class Migration(migrations.Migration):

    dependencies = [
        ('usermemory', '0023_vector_sweep'),
    ]

    operations = [
        migrations.AddField(
            model_name='pendingentryvector',
            name='attempts',
            field=models.PositiveSmallIntegerField(db_default=0),
        ),
        migrations.AddField(
            model_name='pendingentryvector',
            name='last_error',
            field=models.TextField(blank=True, db_default=''),
        ),
        migrations.AddField(
            model_name='pendingentryvector',
            name='parked_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddIndex(
            model_name='pendingentryvector',
            index=models.Index(condition=models.Q(('attempts__gt', 0), ('parked_at__isnull', True)), fields=['queued_at'], name='um_pending_vector_suspect'),
        ),
        migrations.RunSQL(queue_functions(RESET), reverse_sql=queue_functions("")),
    ]
