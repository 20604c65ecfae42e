"""History records who could see each value: the entry's owner, and its visibility and groups before and after
each change. Existing events take their entry's current owner, visibility and groups (one set-based UPDATE);
an event whose entry is gone keeps the defaults, the most restrictive scope: ``self`` of no agent."""

from django.db import migrations, models

COPY_ENTRY_SCOPE = """
UPDATE usermemory_memoryevent
SET owner = COALESCE(entry.source_agent_id, ''), old_visibility = entry.visibility,
    old_group_ids = entry.group_ids, visibility = entry.visibility, group_ids = entry.group_ids
FROM usermemory_memoryentry AS entry
WHERE entry.id = usermemory_memoryevent.entry_id
"""


class Migration(migrations.Migration):
    dependencies = [
        ("usermemory", "0007_policy_change_notify"),
    ]

    operations = [
        migrations.AddField(
            model_name="memoryevent",
            name="group_ids",
            field=models.JSONField(blank=True, default=list),
        ),
        migrations.AddField(
            model_name="memoryevent",
            name="old_group_ids",
            field=models.JSONField(blank=True, default=list),
        ),
        migrations.AddField(
            model_name="memoryevent",
            name="old_visibility",
            field=models.CharField(
                choices=[("self", "self"), ("group", "group"), ("global", "global")],
                default="self",
                max_length=6,
            ),
        ),
        migrations.AddField(
            model_name="memoryevent",
            name="owner",
            field=models.CharField(
                blank=True,
                help_text="the entry's source agent when the event was written, if any",
                max_length=64,
            ),
        ),
        migrations.AddField(
            model_name="memoryevent",
            name="visibility",
            field=models.CharField(
                choices=[("self", "self"), ("group", "group"), ("global", "global")],
                default="self",
                max_length=6,
            ),
        ),
        migrations.RunSQL(COPY_ENTRY_SCOPE, reverse_sql=migrations.RunSQL.noop),
    ]
