"""ActivityPolicy: activity's part of an agent's policy, one-to-one with the agent, in activity's own table
(issue 48). Every stored policy's values of these fields are copied from ``usermemory.AgentMemoryPolicy``
(whose columns ``usermemory.0027`` drops after); backwards, they are copied back before this table goes."""
import django.db.models.deletion
from django.db import migrations, models



FIELDS = ('tool_call_retention_days', 'llm_budget')


def copy_from_memory_policy(apps, schema_editor):
    """Every stored policy's values, as they are (its updated_at too), in one statement."""
    source = apps.get_model("usermemory", "AgentMemoryPolicy")._meta.db_table
    target = apps.get_model("activity", "ActivityPolicy")._meta.db_table
    columns = ", ".join(["agent_id", "updated_at", *FIELDS])
    schema_editor.execute(f"INSERT INTO {target} ({columns}) SELECT {columns} FROM {source}")


def copy_back(apps, schema_editor):
    memory_policy = apps.get_model("usermemory", "AgentMemoryPolicy")
    part = apps.get_model("activity", "ActivityPolicy")
    for row in part.objects.values("agent_id", *FIELDS).iterator():
        agent_id = row.pop("agent_id")
        memory_policy.objects.update_or_create(agent_id=agent_id, defaults=row)


class Migration(migrations.Migration):

    dependencies = [
        ('activity', '0004_llm_spend'),
        ('apikeys', '0002_auth_change_notify'),
        ('usermemory', '0026_observed_at'),
    ]

    operations = [
        migrations.CreateModel(
            name='ActivityPolicy',
            fields=[
                ('agent', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name='activity_policy', serialize=False, to='apikeys.agent')),
                ('tool_call_retention_days', models.PositiveIntegerField(default=30, help_text="Dream deletes this agent's tool-call log older than this; 0 keeps it forever")),
                ('llm_budget', models.DecimalField(blank=True, decimal_places=2, help_text="Dollars this agent's LLM calls may spend in any LLM_BUDGET_WINDOW, at every door; empty: LLM_BUDGET_PER_AGENT", max_digits=8, null=True)),
                ('updated_at', models.DateTimeField(auto_now=True)),
            ],
            options={
                'verbose_name': 'activity policy',
                'verbose_name_plural': 'activity policies',
            },
        ),
        migrations.RunPython(copy_from_memory_policy, copy_back),
    ]
