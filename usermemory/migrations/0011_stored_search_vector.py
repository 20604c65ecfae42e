"""The ranked search's full-text side reads a stored ``tsvector`` instead of parsing every visible entry's text
on each query, and the default text search configuration drops English stop words.

- ``memory_simple``: PostgreSQL's ``simple`` configuration (words lowercased, no stemming, so that mixed
  languages keep their words), with English stop words dropped first, so that a natural-language question's
  "what", "did" and "the" neither match nor weigh. ``SEARCH_LANGUAGE`` may name any other configuration
  (``english``, ``german``...): the search then parses the text on the fly.
- ``usermemory_memoryentry.search_vector``: ``to_tsvector('memory_simple', key || ' ' || value_text)``, a stored
  generated column, written by PostgreSQL on every insert and on every update of ``key`` or ``value_text``.
  It is not part of the Django model, so that no ORM read fetches it; only ``usermemory.search_store`` reads
  it. It has no index: the search reads one user's visible rows, found by the user's own indexes, so a
  recall's access updates stay HOT (migration 0005).
"""

from django.db import migrations

CONFIG = """
CREATE TEXT SEARCH DICTIONARY memory_english_stop (TEMPLATE = pg_catalog.simple, STOPWORDS = english, ACCEPT = false);
CREATE TEXT SEARCH CONFIGURATION memory_simple (COPY = pg_catalog.simple);
ALTER TEXT SEARCH CONFIGURATION memory_simple
    ALTER MAPPING FOR asciiword, word, numword, asciihword, hword, numhword, hword_asciipart, hword_part,
    hword_numpart WITH memory_english_stop, pg_catalog.simple;
"""
DROP_CONFIG = "DROP TEXT SEARCH CONFIGURATION memory_simple; DROP TEXT SEARCH DICTIONARY memory_english_stop;"

COLUMN = """
ALTER TABLE usermemory_memoryentry ADD COLUMN search_vector tsvector
    GENERATED ALWAYS AS (to_tsvector('memory_simple'::regconfig, key || ' ' || value_text)) STORED;
"""
DROP_COLUMN = "ALTER TABLE usermemory_memoryentry DROP COLUMN search_vector;"


class Migration(migrations.Migration):
    dependencies = [("usermemory", "0010_entry_embeddings")]

    operations = [
        migrations.RunSQL(CONFIG, DROP_CONFIG),
        migrations.RunSQL(COLUMN, DROP_COLUMN),
    ]
