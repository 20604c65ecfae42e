"""DreamPolicy: Dream's part of an agent's policy, one-to-one with the agent, in dream's own table (issue 48).
Every stored policy's values of these fields are copied from ``usermemory.AgentMemoryPolicy`` (whose columns
``usermemory.0027`` drops after); backwards, they are copied back before this table goes."""
import django.db.models.deletion
from django.db import migrations, models



FIELDS = ('dream_enabled', 'cross_agent_maintenance', 'max_cost_per_run', 'max_llm_calls_per_run', 'max_llm_calls_per_user', 'prune_stale_after_days', 'prune_expired_after_days', 'summarize_interactions', 'summarize_min_entries', 'summarize_target_entries', 'summarize_group_by', 'preserve_agent_provenance', 'summarize_requires_approval', 'detect_contradictions', 'confirm_contradictions_with_llm')


def copy_from_memory_policy(apps, schema_editor):
    """Every stored policy's values, as they are (its updated_at too), in one statement."""
    source = apps.get_model("usermemory", "AgentMemoryPolicy")._meta.db_table
    target = apps.get_model("dream", "DreamPolicy")._meta.db_table
    columns = ", ".join(["agent_id", "updated_at", *FIELDS])
    schema_editor.execute(f"INSERT INTO {target} ({columns}) SELECT {columns} FROM {source}")


def copy_back(apps, schema_editor):
    memory_policy = apps.get_model("usermemory", "AgentMemoryPolicy")
    part = apps.get_model("dream", "DreamPolicy")
    for row in part.objects.values("agent_id", *FIELDS).iterator():
        agent_id = row.pop("agent_id")
        memory_policy.objects.update_or_create(agent_id=agent_id, defaults=row)


class Migration(migrations.Migration):

    dependencies = [
        ('apikeys', '0002_auth_change_notify'),
        ('usermemory', '0026_observed_at'),
        ('dream', '0005_key_vectors'),
    ]

    operations = [
        migrations.CreateModel(
            name='DreamPolicy',
            fields=[
                ('agent', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name='dream_policy', serialize=False, to='apikeys.agent')),
                ('dream_enabled', models.BooleanField(default=False)),
                ('cross_agent_maintenance', models.BooleanField(default=False)),
                ('max_cost_per_run', models.DecimalField(decimal_places=2, default=0.5, help_text='Dollars of LLM calls one Dream cycle may spend', max_digits=8)),
                ('max_llm_calls_per_run', models.PositiveIntegerField(default=100, help_text='LLM calls one Dream cycle may make in all (summaries, confirmations), whatever they cost')),
                ('max_llm_calls_per_user', models.PositiveIntegerField(default=10, help_text='LLM calls one Dream cycle may make about one user')),
                ('prune_stale_after_days', models.PositiveIntegerField(default=90, help_text='0 disables pruning')),
                ('prune_expired_after_days', models.PositiveIntegerField(default=30, help_text='Dream deletes entries past their validTo for this long; 0 keeps them')),
                ('summarize_interactions', models.BooleanField(default=False)),
                ('summarize_min_entries', models.PositiveIntegerField(default=10, help_text='A group of at least this many entries is summarised')),
                ('summarize_target_entries', models.PositiveIntegerField(default=3, help_text='A group becomes at most this many summaries')),
                ('summarize_group_by', models.CharField(choices=[('category', 'category'), ('key_prefix', 'key prefix')], default='category', help_text="category, or key_prefix: a key's part before its first '.', ':' or '/'", max_length=16)),
                ('preserve_agent_provenance', models.BooleanField(default=True, help_text="A summary's provenance names the agents that wrote its sources")),
                ('summarize_requires_approval', models.BooleanField(default=False, help_text="Summaries wait for staff approval on the Dream run's page before any write")),
                ('detect_contradictions', models.BooleanField(default=True)),
                ('confirm_contradictions_with_llm', models.BooleanField(default=False, help_text='The LLM confirms each contradiction by meaning (within maxCostPerRun)')),
                ('updated_at', models.DateTimeField(auto_now=True)),
            ],
            options={
                'verbose_name': 'Dream policy',
                'verbose_name_plural': 'Dream policies',
            },
        ),
        migrations.RunPython(copy_from_memory_policy, copy_back),
    ]
