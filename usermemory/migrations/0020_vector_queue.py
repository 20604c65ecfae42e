"""The queue of entries waiting for their vector (issue 31): filled by triggers in each write's own transaction,
emptied by the background consumer (memoryplatform/embeddings/consumer.py)."""

import django.db.models.deletion
import django.db.models.functions.datetime
from django.db import migrations, models


# The queue's rows go with their entry: the database's cascade, whoever deletes it (the stores' raw deletes).
FOREIGN_KEY = (
    "ALTER TABLE usermemory_pendingentryvector ADD CONSTRAINT usermemory_pendingentryvector_entry_fk "
    "FOREIGN KEY (entry_id) REFERENCES usermemory_memoryentry (id) ON DELETE CASCADE"
)

# Queue entries as they are written or their embedded text ("key: value_text") changes, in the write's own
# transaction, and wake the consumers as it commits (pg_notify is transactional; repeats are merged). New rows
# by one statement-level trigger over the statement's new rows (a bulk insert pays once, not per row); changed
# ones by a row trigger whose WHEN, checked without calling the function, skips every other update (recall's
# access stamps). The time is the clock's, not the transaction's: a consumer removes a row only if it was not
# queued again since.
QUEUE_FUNCTIONS = [
    """
CREATE FUNCTION usermemory_queue_new_vectors() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO usermemory_pendingentryvector (entry_id, queued_at, not_before)
    SELECT id, clock_timestamp(), NULL FROM new_entries
    ON CONFLICT (entry_id) DO UPDATE SET queued_at = EXCLUDED.queued_at, not_before = NULL;
    IF FOUND THEN
        PERFORM pg_notify('memoryplatform_vectors', TG_TABLE_NAME);
    END IF;
    RETURN NULL;
END
$$
""",
    """
CREATE FUNCTION usermemory_queue_vector() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO usermemory_pendingentryvector (entry_id, queued_at, not_before)
    VALUES (NEW.id, clock_timestamp(), NULL)
    ON CONFLICT (entry_id) DO UPDATE SET queued_at = EXCLUDED.queued_at, not_before = NULL;
    PERFORM pg_notify('memoryplatform_vectors', TG_TABLE_NAME);
    RETURN NULL;
END
$$
""",
]

TRIGGERS = [
    "CREATE TRIGGER usermemory_memoryentry_queue_vector_new AFTER INSERT ON usermemory_memoryentry "
    "REFERENCING NEW TABLE AS new_entries FOR EACH STATEMENT EXECUTE FUNCTION usermemory_queue_new_vectors()",
    "CREATE TRIGGER usermemory_memoryentry_queue_vector_changed AFTER UPDATE OF key, value_text "
    "ON usermemory_memoryentry FOR EACH ROW "
    "WHEN (OLD.key IS DISTINCT FROM NEW.key OR OLD.value_text IS DISTINCT FROM NEW.value_text) "
    "EXECUTE FUNCTION usermemory_queue_vector()",
]

# The entries written before the queue existed and still without a vector (stale ones, and those of another
# model, are the scheduled re-embedding's).
BACKFILL = (
    "INSERT INTO usermemory_pendingentryvector (entry_id, queued_at) "
    "SELECT e.id, e.updated_at FROM usermemory_memoryentry e "
    "WHERE NOT EXISTS (SELECT 1 FROM usermemory_entryembedding v WHERE v.entry_id = e.id)"
)

DROP = [
    "DROP TRIGGER IF EXISTS usermemory_memoryentry_queue_vector_new ON usermemory_memoryentry",
    "DROP TRIGGER IF EXISTS usermemory_memoryentry_queue_vector_changed ON usermemory_memoryentry",
    "DROP FUNCTION IF EXISTS usermemory_queue_vector()",
    "DROP FUNCTION IF EXISTS usermemory_queue_new_vectors()",
]


class Migration(migrations.Migration):

    dependencies = [
        ('usermemory', '0019_ttl_and_expired_pruning'),
    ]

    operations = [
        migrations.CreateModel(
            name='PendingEntryVector',
            fields=[
                ('queued_at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
                ('not_before', models.DateTimeField(blank=True, null=True)),
                ('entry', models.OneToOneField(db_constraint=False, on_delete=django.db.models.deletion.DO_NOTHING, primary_key=True, related_name='pending_vector', serialize=False, to='usermemory.memoryentry')),
            ],
            options={
                'indexes': [models.Index(fields=['queued_at'], name='um_pending_vector_queued')],
            },
        ),
        migrations.RunSQL(sql=FOREIGN_KEY, reverse_sql=migrations.RunSQL.noop),
        migrations.RunSQL(sql=[*QUEUE_FUNCTIONS, *TRIGGERS], reverse_sql=DROP),
        migrations.RunSQL(sql=BACKFILL, reverse_sql=migrations.RunSQL.noop),
    ]
