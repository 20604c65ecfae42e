"""The outbox: every row history inserts (usermemory's event log, written in the transaction of each change
to a memory) writes its event here, in the same statement's transaction. A statement trigger with a transition
table: one INSERT ... SELECT per statement, however many rows a batch writes.

The events app owns the trigger and the rows it writes; usermemory neither knows nor calls it.
"""

from django.db import migrations

FORWARD = """
CREATE FUNCTION events_outbox_from_history() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO events_event (
        type, occurred_at, user_id, key, entry_id, history_event_id, owner,
        visibility, group_ids, old_visibility, old_group_ids, value, old_value
    )
    SELECT
        CASE h.action
            WHEN 'created' THEN 'memory.created'
            WHEN 'updated' THEN 'memory.updated'
            WHEN 'superseded' THEN 'memory.superseded'
            WHEN 'pruned' THEN 'memory.expired'
            WHEN 'deleted' THEN 'memory.deleted'
            WHEN 'evicted' THEN 'memory.deleted'
            WHEN 'flagged' THEN 'conflict.flagged'
            WHEN 'unflagged' THEN 'conflict.settled'
            WHEN 'resolved' THEN 'conflict.settled'
            WHEN 'erased' THEN 'user.erased'
        END,
        h.created_at, h.user_id,
        CASE WHEN h.action = 'erased' THEN '' ELSE h.key END,
        h.entry_id, h.id,
        CASE WHEN h.action = 'erased' THEN '' ELSE h.owner END,
        -- user.erased names the user only, and every subscriber gets it
        CASE WHEN h.action = 'erased' THEN 'global' ELSE h.visibility END,
        CASE WHEN h.action = 'erased' THEN '[]'::jsonb ELSE h.group_ids END,
        CASE WHEN h.action = 'erased' THEN 'global' ELSE h.old_visibility END,
        CASE WHEN h.action = 'erased' THEN '[]'::jsonb ELSE h.old_group_ids END,
        CASE WHEN h.action = 'erased' THEN NULL ELSE h.new_value END,
        CASE WHEN h.action = 'erased' THEN NULL ELSE h.old_value END
    FROM history_rows AS h
    ORDER BY h.id;
    RETURN NULL;
END
$$;

CREATE TRIGGER events_outbox AFTER INSERT ON usermemory_memoryevent
    REFERENCING NEW TABLE AS history_rows
    FOR EACH STATEMENT EXECUTE FUNCTION events_outbox_from_history();
"""

BACKWARD = """
DROP TRIGGER IF EXISTS events_outbox ON usermemory_memoryevent;
DROP FUNCTION IF EXISTS events_outbox_from_history();
"""


class Migration(migrations.Migration):
    dependencies = [
        ("events", "0001_events_webhooks"),
        ("usermemory", "0028_vector_sweep_to_kernel"),
    ]

    operations = [migrations.RunSQL(FORWARD, BACKWARD)]
