"""The extract door's record of the messages it extracted past an agent's watermark (issue 46: no message is
extracted twice, by any door), and the count of facts time order left out."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('apikeys', '0002_auth_change_notify'),
        ('conversations', '0008_message_seq_per_scope'),
        ('extraction', '0002_status_skipped'),
    ]

    operations = [
        migrations.AddField(
            model_name='extraction',
            name='facts_skipped',
            field=models.PositiveIntegerField(default=0, help_text="Not written: the stored value was observed after the fact's message."),
        ),
        migrations.CreateModel(
            name='ExtractedMessage',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('position', models.PositiveBigIntegerField()),
                ('created_at', models.DateTimeField()),
                ('agent', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='apikeys.agent')),
                ('conversation', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='conversations.conversation')),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('conversation', 'agent', 'position'), name='extracted_message_uniq')],
            },
        ),
    ]
