"""Message vectors stored as ``halfvec`` (pgvector 0.7 or later), converted in place as entries' are (usermemory
0020, which says what it costs): Django's type change, ``ALTER COLUMN ... TYPE halfvec USING embedding::halfvec``."""

import pgvector.django.halfvec
from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('conversations', '0005_vector_queue'),
    ]

    operations = [
        migrations.AlterField(
            model_name='messageembedding',
            name='embedding',
            field=pgvector.django.halfvec.HalfVectorField(),
        ),
    ]
