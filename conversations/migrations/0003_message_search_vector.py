"""Conversation search reads a ``tsvector`` of each message computed once, when the message is written, within
PostgreSQL's limits, instead of parsing every candidate message per query (issue 33, finding 1: one message of
900 KB of distinct words made a ``tsvector`` over PostgreSQL's 1 MB limit, and from then on every search that
read it failed).

- ``conversations_message_document(config, content)``: a message's document, bounded.
  - Text blocks of at most ``100,000`` characters (measured as their JSON text, which is never shorter): exactly
    the document the search parsed per query before, ``jsonb_to_tsvector`` over each block's ``text`` (its
    strings), so the ranks of ordinary messages do not move.
  - A longer message: the first 100,000 characters of that JSON text, its escapes read as spaces. It is indexed
    in part and stored whole.
  - Why 100,000: the worst text (distinct hyphenated words of 4-byte letters: each character in two lexemes,
    4 bytes each) makes about 8 bytes of lexemes and positions a character, so at most about 800 KB, under the
    1 MB (1,048,575 bytes) that ``to_tsvector`` allows; measured, the worst texts fail from about 131,000
    characters. Longer words than 2,047 bytes are skipped by PostgreSQL (a notice), and positions past 16,383
    are clamped, so neither can fail.
- ``conversations_message.search_vector``: that document in ``memory_simple`` (usermemory 0011), a stored
  generated column, so every write (history, case log, memory stream, sync, admin) computes it the same way
  and existing rows are backfilled within the same bound. Not part of the Django model, so that no ORM read
  fetches it; only ``conversations.selectors.message_search`` reads it.
- Cost: adding the column rewrites the table under an ACCESS EXCLUSIVE lock (reads and writes of messages wait),
  computing each row's vector: about 0.1 ms a message of a few words on the benchmark machine (2 s for 20,000),
  and a few milliseconds for a message near the bound. On a large table, run it in a maintenance window.
"""

from django.db import migrations

BOUND = 100_000

FUNCTION = f"""
CREATE FUNCTION conversations_message_document(config regconfig, content jsonb) RETURNS tsvector
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE
    WHEN length(jsonb_path_query_array(content, '$[*].text')::text) <= {BOUND}
    THEN jsonb_to_tsvector(config, jsonb_path_query_array(content, '$[*].text'), '["string"]')
    ELSE to_tsvector(config, regexp_replace(
        left(jsonb_path_query_array(content, '$[*].text ? (@.type() == "string")')::text, {BOUND}),
        '\\\\(u[0-9a-fA-F]{{0,4}}|.)', ' ', 'g'))
END;
"""
DROP_FUNCTION = "DROP FUNCTION conversations_message_document(regconfig, jsonb);"

COLUMN = """
ALTER TABLE conversations_message ADD COLUMN search_vector tsvector
    GENERATED ALWAYS AS (conversations_message_document('memory_simple'::regconfig, content)) STORED;
"""
DROP_COLUMN = "ALTER TABLE conversations_message DROP COLUMN search_vector;"


class Migration(migrations.Migration):
    dependencies = [
        ("conversations", "0002_message_session_optional_agent_always_set"),
        ("usermemory", "0011_stored_search_vector"),
    ]

    operations = [
        migrations.RunSQL(FUNCTION, DROP_FUNCTION),
        migrations.RunSQL(COLUMN, DROP_COLUMN),
    ]
