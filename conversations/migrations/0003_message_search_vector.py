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
- ``conv_msg_search_idx``: a GIN index over it. Over 5,000 messages a search took 1-4 ms with it and 4-10 ms
  without (100 ms parsing per query before); a message's insert costs about the same (0.7 ms for a short one,
  40 ms for one of 900 KB, up to 100 ms when it flushes GIN's pending list).
- Cost: adding the column rewrites the table under an ACCESS EXCLUSIVE lock (reads and writes of messages wait)
  while PostgreSQL computes each row's vector, and the index build then blocks writes. Measured on the 2-core
  benchmark machine over 50,000 messages of 8-60 words: 1.8 s for the rewrite and 0.45 s for the index (a few
  ms more for each message near the bound), so about a minute for a million messages: run it in a maintenance
  window on a large table.
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

INDEX = "CREATE INDEX conv_msg_search_idx ON conversations_message USING gin (search_vector);"
DROP_INDEX = "DROP INDEX conv_msg_search_idx;"


class Migration(migrations.Migration):
    dependencies = [
        ("conversations", "0002_message_session_optional_agent_always_set"),
        ("usermemory", "0011_stored_search_vector"),
    ]

    operations = [
        migrations.RunSQL(FUNCTION, DROP_FUNCTION),
        migrations.RunSQL(COLUMN, DROP_COLUMN),
        migrations.RunSQL(INDEX, DROP_INDEX),
    ]
