"""Contradictions by meaning (issue 20): the partners of each entry, and the threshold's default."""

import django.contrib.postgres.fields
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('usermemory', '0013_summaries'),
    ]

    operations = [
        migrations.AddField(
            model_name='memoryentry',
            name='meaning_conflicts',
            field=django.contrib.postgres.fields.ArrayField(base_field=models.BigIntegerField(), blank=True, db_default=[], default=list, size=None),
        ),
        migrations.AlterField(
            model_name='agentmemorypolicy',
            name='semantic_contradiction_threshold',
            field=models.FloatField(default=0.96, help_text='Cosine similarity from which two keys of one user mean the same thing'),
        ),
    ]
