"""A write's statements run prepared (``usermemory.sql``, psycopg's ``prepare=True``, and
``usermemory.sql.base.prepared_row`` for the turn count and the upsert): parsed once per connection, then run
again by name (Django's query log shows them only when they are not prepared); dropped by psycopg with a
rolled-back write, and prepared again by the next one; off with ``PREPARED_STATEMENTS=false``."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext, override_settings

from tests.helpers import assert_envelope
from usermemory.models import AgentMemoryPolicy

pytestmark = [pytest.mark.django_db]

MEMORIES = "/usermemorystore/memories"
TURN_COUNT = "usermemory_turnwritecount"
UPSERT = "usermemory_memoryevent"  # the upsert statement writes the history event too


def prepared() -> list[str]:
    """The statements prepared on this connection through the protocol (psycopg), not by SQL PREPARE."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements WHERE NOT from_sql")
        return [row[0] for row in cursor.fetchall()]


def write(api, key, *, turn="t1"):
    body = {"userId": "u1", "key": key, "value": "v", "visibility": "self"}
    return api.put(MEMORIES, body, format="json", HTTP_X_TURN_ID=turn)


def test_a_write_prepares_its_statements_once(agent_a_api):
    assert write(agent_a_api, "k1").status_code == 201
    statements = prepared()
    for table in (TURN_COUNT, UPSERT):  # not the key lookup: the key cache skips it (apikeys/store)
        assert sum(table in s for s in statements) == 1, (table, statements)
    assert write(agent_a_api, "k2").status_code == 201
    assert write(agent_a_api, "k1").status_code == 200
    assert sorted(prepared()) == sorted(statements)


@override_settings(PREPARED_STATEMENTS=False)
def test_unprepared_statements_are_logged_with_their_values(agent_a_api):
    # Prepared, the turn count and the upsert run on a psycopg cursor of their own (usermemory.sql.base
    # .prepared_row says why), which Django does not log: pg_prepared_statements shows them instead.
    with CaptureQueriesContext(connection) as queries:
        assert write(agent_a_api, "logged-key").status_code == 201
    upserts = [q["sql"] for q in queries.captured_queries if UPSERT in q["sql"]]
    assert len(upserts) == 1 and "'logged-key'" in upserts[0] and "%s" not in upserts[0]


def test_a_refused_write_rolls_back_and_the_next_write_prepares_again(agent_a_api):
    AgentMemoryPolicy.objects.create(agent_id="agent-a", max_writes_per_turn=1)
    assert write(agent_a_api, "k1").status_code == 201
    assert_envelope(write(agent_a_api, "k2"), 429, "rate_limited")
    assert not any(TURN_COUNT in s for s in prepared())  # psycopg drops them with the rollback
    assert write(agent_a_api, "k3", turn="t2").status_code == 201
    assert any(TURN_COUNT in s for s in prepared())
    stored = agent_a_api.get(f"{MEMORIES}/u1").json()
    assert sorted(entry["key"] for entry in stored) == ["k1", "k3"]


@override_settings(PREPARED_STATEMENTS=False)
def test_off_by_setting(agent_a_api):
    before = sorted(prepared())
    with CaptureQueriesContext(connection) as queries:
        assert write(agent_a_api, "k1").status_code == 201
    assert any(UPSERT in q["sql"] for q in queries.captured_queries)
    assert sorted(prepared()) == before
