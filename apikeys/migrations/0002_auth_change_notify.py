"""PostgreSQL: notify channel ``memoryplatform_auth`` when a key or an agent changes, so every process empties
its cache of looked-up keys (``apikeys/keycache.py``). Recording a key's or an agent's last use
(``last_used_at``, ``last_active_at``) is not a change. A new key is not either: the cache never holds a key it
did not find. ``usermemory.0007`` adds the same for memory policies.
"""

from django.db import migrations

NOTIFY_FUNCTION = """
CREATE OR REPLACE FUNCTION memoryplatform_auth_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('memoryplatform_auth', TG_TABLE_NAME);
    RETURN NULL;
END
$$
"""

# table: the column a use writes, which alone is not a change
TABLES = {"apikeys_apikey": "last_used_at", "apikeys_agent": "last_active_at"}


def triggers(table: str, use_column: str) -> list[str]:
    return [
        f"CREATE TRIGGER {table}_changed AFTER UPDATE ON {table} FOR EACH ROW "
        f"WHEN ((to_jsonb(OLD) - '{use_column}') IS DISTINCT FROM (to_jsonb(NEW) - '{use_column}')) "
        f"EXECUTE FUNCTION memoryplatform_auth_changed()",
        f"CREATE TRIGGER {table}_removed AFTER DELETE OR TRUNCATE ON {table} FOR EACH STATEMENT "
        f"EXECUTE FUNCTION memoryplatform_auth_changed()",
    ]


def create(apps, schema_editor):
    schema_editor.execute(NOTIFY_FUNCTION)
    for table, use_column in TABLES.items():
        for statement in triggers(table, use_column):
            schema_editor.execute(statement)


def drop(apps, schema_editor):
    for table in TABLES:
        schema_editor.execute(f"DROP TRIGGER IF EXISTS {table}_changed ON {table}")
        schema_editor.execute(f"DROP TRIGGER IF EXISTS {table}_removed ON {table}")
    schema_editor.execute("DROP FUNCTION IF EXISTS memoryplatform_auth_changed()")


class Migration(migrations.Migration):
    dependencies = [("apikeys", "0001_initial")]

    operations = [migrations.RunPython(create, drop)]
