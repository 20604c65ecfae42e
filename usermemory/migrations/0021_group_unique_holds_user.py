"""The entry-group unique key holds user_id (last, so the entry still leads, as its foreign key needs): Citus
demands the distribution column in every unique key (docs/scaling.md). The same rows are unique either way
(an entry has one user). Rebuilds the index; atomic, so the key is never missing."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('usermemory', '0020_vector_queue'),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name='memoryentrygroup',
            name='memory_group_unique',
        ),
        migrations.AddConstraint(
            model_name='memoryentrygroup',
            constraint=models.UniqueConstraint(fields=('entry', 'group_id', 'user_id'), name='memory_group_unique'),
        ),
    ]
