"""Dream V2 (issue 20): the summary settings of a memory policy, and what a Dream run summarised."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('usermemory', '0012_validity_in_time'),
    ]

    operations = [
        migrations.AddField(
            model_name='agentmemorypolicy',
            name='confirm_contradictions_with_llm',
            field=models.BooleanField(default=False, help_text='The LLM confirms each contradiction by meaning (within maxCostPerRun)'),
        ),
        migrations.AddField(
            model_name='agentmemorypolicy',
            name='preserve_agent_provenance',
            field=models.BooleanField(default=True, help_text="A summary's provenance names the agents that wrote its sources"),
        ),
        migrations.AddField(
            model_name='agentmemorypolicy',
            name='semantic_contradiction_threshold',
            field=models.FloatField(default=0.9, help_text='Cosine similarity from which two keys of one user mean the same thing'),
        ),
        migrations.AddField(
            model_name='agentmemorypolicy',
            name='summarize_group_by',
            field=models.CharField(choices=[('category', 'category'), ('key_prefix', 'key prefix')], default='category', help_text="category, or key_prefix: a key's part before its first '.', ':' or '/'", max_length=16),
        ),
        migrations.AddField(
            model_name='agentmemorypolicy',
            name='summarize_min_entries',
            field=models.PositiveIntegerField(default=10, help_text='A group of at least this many entries is summarised'),
        ),
        migrations.AddField(
            model_name='agentmemorypolicy',
            name='summarize_requires_approval',
            field=models.BooleanField(default=False, help_text="Summaries wait for staff approval on the Dream run's page before any write"),
        ),
        migrations.AddField(
            model_name='agentmemorypolicy',
            name='summarize_target_entries',
            field=models.PositiveIntegerField(default=3, help_text='A group becomes at most this many summaries'),
        ),
        migrations.AlterField(
            model_name='agentmemorypolicy',
            name='max_cost_per_run',
            field=models.DecimalField(decimal_places=2, default=0.5, help_text='Dollars of LLM calls one Dream cycle may spend', max_digits=8),
        ),
    ]
