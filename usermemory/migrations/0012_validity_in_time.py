"""Validity in time (issue 20): valid_from (existing entries: their last write), valid_to, superseded_by
and a Dream summary's provenance."""

import django.db.models.deletion
import django.db.models.functions.datetime
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('usermemory', '0011_stored_search_vector'),
    ]

    operations = [
        migrations.AddField(
            model_name='memoryentry',
            name='provenance',
            field=models.JSONField(blank=True, help_text="A Dream summary's sources: entries, agents, model, cost, run.", null=True),
        ),
        migrations.AddField(
            model_name='memoryentry',
            name='superseded_by',
            field=models.ForeignKey(blank=True, db_constraint=False, help_text='The Dream summary that replaced this entry; it is kept, hidden from reads by default.', null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='supersedes', to='usermemory.memoryentry'),
        ),
        migrations.AddField(
            model_name='memoryentry',
            name='valid_from',
            field=models.DateTimeField(db_default=django.db.models.functions.datetime.Now(), help_text='When the stored value became true: its write.'),
        ),
        migrations.AddField(
            model_name='memoryentry',
            name='valid_to',
            field=models.DateTimeField(blank=True, help_text='Given on write, or set when Dream superseded the entry.', null=True),
        ),
        migrations.RunSQL(
            "UPDATE usermemory_memoryentry SET valid_from = updated_at", reverse_sql=migrations.RunSQL.noop
        ),
        migrations.AlterField(
            model_name='memoryevent',
            name='action',
            field=models.CharField(choices=[('created', 'created'), ('updated', 'updated'), ('deleted', 'deleted'), ('evicted', 'evicted'), ('pruned', 'pruned'), ('flagged', 'flagged'), ('unflagged', 'unflagged'), ('resolved', 'resolved'), ('superseded', 'superseded'), ('erased', 'erased')], max_length=10),
        ),
    ]
