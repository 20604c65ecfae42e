"""Entry vectors stored as ``halfvec`` (pgvector 0.7 or later: 16-bit floats, 2 bytes a dimension instead of
4), converted in place: ``ALTER COLUMN embedding TYPE halfvec USING embedding::halfvec`` (Django's type change).
Still no fixed dimension. The statement rewrites the table under an exclusive lock: 1.7 s for 100k rows of
384 dimensions here (bench/RESULTS.md session 12), so minutes at 10M, while searches and vector writes wait.
Reversible: back to ``vector``, with the values as the halves held them. LoCoMo's dev-half quality moved by
at most 0.0005 (session 12)."""

import pgvector.django.halfvec
from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('usermemory', '0021_group_unique_holds_user'),
    ]

    operations = [
        migrations.AlterField(
            model_name='entryembedding',
            name='embedding',
            field=pgvector.django.halfvec.HalfVectorField(),
        ),
    ]
