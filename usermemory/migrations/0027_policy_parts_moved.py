"""Dream's, extraction's and activity's fields leave usermemory's policy: each app keeps its part in its own
table since (dream.0006, extraction.0004, activity.0005 copied the values first). Backwards, the columns come
back with their defaults, and those migrations copy the values back as they are unapplied (issue 48)."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('usermemory', '0026_observed_at'),
        ('dream', '0006_dream_policy'),
        ('extraction', '0004_extraction_policy'),
        ('activity', '0005_activity_policy'),
    ]

    operations = [
        migrations.RemoveField(
            model_name='agentmemorypolicy',
            name='confirm_contradictions_with_llm',
        ),
        migrations.RemoveField(
            model_name='agentmemorypolicy',
            name='cross_agent_maintenance',
        ),
        migrations.RemoveField(
            model_name='agentmemorypolicy',
            name='detect_contradictions',
        ),
        migrations.RemoveField(
            model_name='agentmemorypolicy',
            name='dream_enabled',
        ),
        migrations.RemoveField(
            model_name='agentmemorypolicy',
            name='extract_from_conversations',
        ),
        migrations.RemoveField(
            model_name='agentmemorypolicy',
            name='extraction_visibility',
        ),
        migrations.RemoveField(
            model_name='agentmemorypolicy',
            name='llm_budget',
        ),
        migrations.RemoveField(
            model_name='agentmemorypolicy',
            name='max_cost_per_run',
        ),
        migrations.RemoveField(
            model_name='agentmemorypolicy',
            name='max_extraction_cost_per_run',
        ),
        migrations.RemoveField(
            model_name='agentmemorypolicy',
            name='max_llm_calls_per_run',
        ),
        migrations.RemoveField(
            model_name='agentmemorypolicy',
            name='max_llm_calls_per_user',
        ),
        migrations.RemoveField(
            model_name='agentmemorypolicy',
            name='preserve_agent_provenance',
        ),
        migrations.RemoveField(
            model_name='agentmemorypolicy',
            name='prune_expired_after_days',
        ),
        migrations.RemoveField(
            model_name='agentmemorypolicy',
            name='prune_stale_after_days',
        ),
        migrations.RemoveField(
            model_name='agentmemorypolicy',
            name='summarize_group_by',
        ),
        migrations.RemoveField(
            model_name='agentmemorypolicy',
            name='summarize_interactions',
        ),
        migrations.RemoveField(
            model_name='agentmemorypolicy',
            name='summarize_min_entries',
        ),
        migrations.RemoveField(
            model_name='agentmemorypolicy',
            name='summarize_requires_approval',
        ),
        migrations.RemoveField(
            model_name='agentmemorypolicy',
            name='summarize_target_entries',
        ),
        migrations.RemoveField(
            model_name='agentmemorypolicy',
            name='tool_call_retention_days',
        ),
        migrations.AlterField(
            model_name='agentmemorypolicy',
            name='semantic_contradiction_threshold',
            field=models.FloatField(default=0.96, help_text="Cosine similarity from which two keys of one user mean the same thing: for Dream's contradictions by meaning and extraction's matching of a fact's key (usermemory.keynames)"),
        ),
    ]
