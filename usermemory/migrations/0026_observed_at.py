"""Time order (issue 46): each entry's observed_at, the time of what its value says; existing entries take
their last write's (updated_at), and the value-writing events of history (created, updated) theirs."""

import django.db.models.functions.datetime
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('usermemory', '0025_policy_llm_budget'),
    ]

    operations = [
        migrations.AddField(
            model_name='memoryentry',
            name='observed_at',
            field=models.DateTimeField(db_default=django.db.models.functions.datetime.Now(), help_text="When what the value says was observed: its message's time for an extracted fact, else its write's, or the observedAt the write gave. An older write does not replace it."),
        ),
        migrations.AddField(
            model_name='memoryevent',
            name='observed_at',
            field=models.DateTimeField(blank=True, help_text="A write's: when what the new value says was observed (the entry's observed_at then).", null=True),
        ),
        migrations.RunSQL(
            "UPDATE usermemory_memoryentry SET observed_at = updated_at", reverse_sql=migrations.RunSQL.noop
        ),
        migrations.RunSQL(
            "UPDATE usermemory_memoryevent SET observed_at = created_at WHERE action IN ('created', 'updated')",
            reverse_sql=migrations.RunSQL.noop,
        ),
    ]
