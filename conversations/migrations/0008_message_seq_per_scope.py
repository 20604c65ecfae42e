"""A message's ``seq`` becomes its number within its scope (the history, the case log, or one agent's memory
stream), and ``position`` keeps the conversation-wide number it was (issue 44, finding 12: one counter across
channels let an agent count another agent's private memory messages from the gaps in the shared channels).

In one transaction, nothing lost: every message's old ``seq`` is copied to ``position``, then ``seq`` is
renumbered 1, 2, 3... within each scope in the old order (which keeps each scope's order, so no cursor order,
vector text or checkpoint order changes); each case-log checkpoint takes its message's new number; the
background extraction's watermarks already hold positions (the old numbers), and read by position from now
on. ``Conversation.next_seq`` is the next position, renamed. Each row of the message table is updated once
(its generated ``search_vector`` is recomputed with it): on a large table, run it in a quiet hour.

Backwards: ``seq`` takes back the position, and checkpoints their message's.
"""

from django.db import migrations, models

FORWARD = [
    "UPDATE conversations_message SET position = seq",
    """UPDATE conversations_message m SET seq = r.n
    FROM (
        SELECT id, row_number() OVER (
            PARTITION BY conversation_id, channel, CASE WHEN channel = 'memory' THEN agent_id END
            ORDER BY position
        ) AS n
        FROM conversations_message
    ) r
    WHERE r.id = m.id AND m.seq <> r.n""",
    """UPDATE conversations_checkpoint k SET last_seq = m.seq
    FROM conversations_message m WHERE m.id = k.last_message_id AND k.last_seq <> m.seq""",
    # The deferred foreign-key checks of the updated rows run now: the ALTERs that follow refuse a table
    # with pending trigger events.
    "SET CONSTRAINTS ALL IMMEDIATE",
]

BACKWARD = [
    """UPDATE conversations_checkpoint k SET last_seq = m.position
    FROM conversations_message m WHERE m.id = k.last_message_id AND k.last_seq <> m.position""",
    "UPDATE conversations_message SET seq = position WHERE seq <> position",
    "SET CONSTRAINTS ALL IMMEDIATE",
]


class Migration(migrations.Migration):

    dependencies = [
        ('conversations', '0007_vector_queue_parking'),
    ]

    operations = [
        migrations.RemoveConstraint(model_name='message', name='conv_message_seq_uniq'),
        migrations.RenameField(model_name='conversation', old_name='next_seq', new_name='next_position'),
        migrations.AlterField(
            model_name='conversation',
            name='next_position',
            field=models.PositiveBigIntegerField(
                default=1,
                editable=False,
                help_text='The position the next message gets (across channels; internal).',
            ),
        ),
        migrations.AddField(
            model_name='message',
            name='position',
            field=models.PositiveBigIntegerField(
                null=True,
                help_text="Its place among all the conversation's messages, in commit order (internal, never shown).",
            ),
        ),
        migrations.RunSQL(sql=FORWARD, reverse_sql=BACKWARD),
        migrations.AlterField(
            model_name='message',
            name='position',
            field=models.PositiveBigIntegerField(
                help_text="Its place among all the conversation's messages, in commit order (internal, never shown).",
            ),
        ),
        migrations.AlterField(
            model_name='message',
            name='seq',
            field=models.PositiveBigIntegerField(
                help_text='Its number within its scope (the history, the case log, or its agent\'s memory stream), in commit order: what callers see.',
            ),
        ),
        migrations.AddConstraint(
            model_name='message',
            constraint=models.UniqueConstraint(fields=('conversation', 'position'), name='conv_message_position_uniq'),
        ),
        migrations.AddConstraint(
            model_name='message',
            constraint=models.UniqueConstraint(
                condition=models.Q(('channel', 'memory'), _negated=True),
                fields=('conversation', 'channel', 'seq'),
                name='conv_message_shared_seq_uniq',
            ),
        ),
        migrations.AddConstraint(
            model_name='message',
            constraint=models.UniqueConstraint(
                condition=models.Q(('channel', 'memory')),
                fields=('conversation', 'agent', 'seq'),
                name='conv_message_memory_seq_uniq',
            ),
        ),
    ]
