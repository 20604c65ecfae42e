"""Dream V2 (issue 20): the summary settings of a memory policy, and what a Dream run summarised."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('dream', '0002_one_cycle_by_advisory_lock'),
    ]

    operations = [
        migrations.AddField(
            model_name='dreamrun',
            name='approval',
            field=models.CharField(blank=True, choices=[('', 'none'), ('pending', 'pending'), ('approved', 'approved'), ('rejected', 'rejected')], help_text='pending: its summaries wait for staff approval (summarizeRequiresApproval).', max_length=8),
        ),
        migrations.AddField(
            model_name='dreamrun',
            name='entries_summarized',
            field=models.PositiveIntegerField(default=0, help_text='Entries superseded by a summary (a dry run: that would be).'),
        ),
        migrations.AddField(
            model_name='dreamrun',
            name='llm_cost',
            field=models.DecimalField(decimal_places=6, default=0, help_text='Dollars spent on LLM calls, from their usage.', max_digits=12),
        ),
        migrations.AddField(
            model_name='dreamrun',
            name='summaries_written',
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AddField(
            model_name='dreamrun',
            name='summarization_failures',
            field=models.PositiveIntegerField(default=0, help_text='Groups whose LLM call failed (error, timeout, malformed answer): nothing changed.'),
        ),
        migrations.AlterField(
            model_name='dreamrun',
            name='details',
            field=models.JSONField(blank=True, default=dict, help_text='Per-agent counts; summaries: proposals, failures, the cost cap.'),
        ),
    ]
