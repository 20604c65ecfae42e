"""PostgreSQL: notify channel ``memoryplatform_auth`` when a memory policy is added, changed or removed. The
key lookup reads the agent's policy with the key, so the processes' key caches must empty
(``apikeys/keycache.py``; the function comes from ``apikeys.0002``).
"""

from django.db import migrations

TABLE = "usermemory_agentmemorypolicy"


def create(apps, schema_editor):
    schema_editor.execute(
        f"CREATE TRIGGER {TABLE}_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON {TABLE} "
        f"FOR EACH STATEMENT EXECUTE FUNCTION memoryplatform_auth_changed()"
    )


def drop(apps, schema_editor):
    schema_editor.execute(f"DROP TRIGGER IF EXISTS {TABLE}_changed ON {TABLE}")


class Migration(migrations.Migration):
    dependencies = [
        ("apikeys", "0002_auth_change_notify"),
        ("usermemory", "0006_turn_count_agent_no_index"),
    ]

    operations = [migrations.RunPython(create, drop)]
