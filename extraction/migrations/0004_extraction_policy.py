"""ExtractionPolicy: extraction's part of an agent's policy, one-to-one with the agent, in extraction's own
table (issue 48). Every stored policy's values of these fields are copied from
``usermemory.AgentMemoryPolicy`` (whose columns ``usermemory.0027`` drops after); backwards, they are copied
back before this table goes."""
import django.db.models.deletion
from django.db import migrations, models



FIELDS = ('extract_from_conversations', 'max_extraction_cost_per_run', 'extraction_visibility')


def copy_from_memory_policy(apps, schema_editor):
    """Every stored policy's values, as they are (its updated_at too), in one statement."""
    source = apps.get_model("usermemory", "AgentMemoryPolicy")._meta.db_table
    target = apps.get_model("extraction", "ExtractionPolicy")._meta.db_table
    columns = ", ".join(["agent_id", "updated_at", *FIELDS])
    schema_editor.execute(f"INSERT INTO {target} ({columns}) SELECT {columns} FROM {source}")


def copy_back(apps, schema_editor):
    memory_policy = apps.get_model("usermemory", "AgentMemoryPolicy")
    part = apps.get_model("extraction", "ExtractionPolicy")
    for row in part.objects.values("agent_id", *FIELDS).iterator():
        agent_id = row.pop("agent_id")
        memory_policy.objects.update_or_create(agent_id=agent_id, defaults=row)


class Migration(migrations.Migration):

    dependencies = [
        ('apikeys', '0002_auth_change_notify'),
        ('usermemory', '0026_observed_at'),
        ('extraction', '0003_door_coverage_and_skipped_facts'),
    ]

    operations = [
        migrations.CreateModel(
            name='ExtractionPolicy',
            fields=[
                ('agent', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name='extraction_policy', serialize=False, to='apikeys.agent')),
                ('extract_from_conversations', models.BooleanField(default=False, help_text='Facts are extracted in the background from the conversations this agent takes part in')),
                ('max_extraction_cost_per_run', models.DecimalField(decimal_places=2, default=0.5, help_text='Dollars of LLM calls one background extraction run may spend for this agent', max_digits=8)),
                ('extraction_visibility', models.CharField(choices=[('self', 'self'), ('group', 'group'), ('global', 'global')], default='self', help_text="An extracted fact's visibility when the request names none, and at most for facts from a conversation without a group", max_length=6)),
                ('updated_at', models.DateTimeField(auto_now=True)),
            ],
            options={
                'verbose_name': 'extraction policy',
                'verbose_name_plural': 'extraction policies',
            },
        ),
        migrations.RunPython(copy_from_memory_policy, copy_back),
    ]
