"""The process's cache of looked-up keys (PostgreSQL): a kept key skips the lookup, and any change to a key,
an agent or a memory policy, made by any connection, reaches the next request."""

import select
import time

import psycopg
import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext, override_settings

from apikeys import keycache
from apikeys.models import ApiKey
from apikeys.services import apikey_revoke
from tests.helpers import assert_envelope
from usermemory.models import AgentMemoryPolicy

ME = "/v1/agents/me"
MEMORIES = "/usermemorystore/memories"


def key_lookups(client, path=ME):
    """The response to a GET, and how many statements looked the key up (a SELECT from the key table;
    recording its use is an UPDATE)."""
    with CaptureQueriesContext(connection) as queries:
        response = client.get(path)
    table = ApiKey._meta.db_table
    return response, sum(
        q["sql"].startswith("SELECT") and table in q["sql"] for q in queries.captured_queries
    )


def elsewhere(sql, params=(), *, heard=True):
    """Commit a statement on a connection of its own, as another process would; then wait (at most 5 s) until
    this process's connection has heard of it, or (``heard=False``) check for 0.3 s that it hears nothing."""
    generation = keycache.ROWS.generation
    _commit_elsewhere(sql, params)
    deadline = time.monotonic() + (5 if heard else 0.3)
    while keycache.ROWS.generation == generation and time.monotonic() < deadline:
        select.select([connection.connection.fileno()], [], [], 0.05)
        keycache.usable()  # takes what arrived
    assert (keycache.ROWS.generation != generation) == heard


def _commit_elsewhere(sql, params):
    settings_dict = connection.settings_dict
    with psycopg.connect(
        dbname=settings_dict["NAME"],
        user=settings_dict["USER"],
        host=settings_dict["HOST"],
        port=settings_dict["PORT"] or 5432,
        password=settings_dict["PASSWORD"] or None,
        autocommit=True,
    ) as other:
        other.execute(sql, params)


class TestKeyRows:
    def test_a_row_read_before_the_cache_was_emptied_is_not_kept(self):
        rows = keycache.KeyRows(max_entries=10)
        before = rows.generation
        rows.clear()
        rows.put("aaaa0000", ("row",), generation=before)
        assert rows.get("aaaa0000") is None
        rows.put("aaaa0000", ("row",), generation=rows.generation)
        assert rows.get("aaaa0000") == ("row",)

    def test_a_full_cache_starts_again(self):
        rows = keycache.KeyRows(max_entries=2)
        for prefix in ("a", "b", "c"):
            rows.put(prefix, (prefix,), generation=rows.generation)
        assert len(rows) == 1 and rows.get("c") == ("c",)


pg = [pytest.mark.django_db(transaction=True)]


class TestOnPostgres:
    """Every Django connection LISTENs (no DATABASE_LISTEN_URL; test_key_cache_listener.py has the other)."""

    pytestmark = pg

    @pytest.fixture(autouse=True)
    def _each_connection_listens(self, settings):
        settings.DATABASE_LISTEN_URL = ""

    @pytest.fixture
    def api(self, agent_a_api):
        """An agent's client whose key is kept: the first request records the key's first use, so the second
        reads it again, and keeps it."""
        for _ in range(2):
            response, lookups = key_lookups(agent_a_api)
            assert response.status_code == 200 and lookups == 1
        return agent_a_api

    def test_the_next_request_skips_the_lookup(self, api):
        response, lookups = key_lookups(api)
        assert response.json()["id"] == "agent-a"
        assert lookups == 0

    def test_a_revocation_by_another_connection_refuses_the_next_request(self, api):
        elsewhere("UPDATE apikeys_apikey SET revoked_at = now() WHERE prefix = %s", [api.key.prefix])
        body = assert_envelope(api.get(ME), 401, "unauthorized")
        assert "revoked" in body["error"]

    def test_a_revocation_in_this_process_refuses_the_next_request(self, api):
        apikey_revoke(prefix=api.key.prefix)
        assert_envelope(api.get(ME), 401, "unauthorized")

    def test_an_expiry_set_elsewhere_applies_at_once(self, api):
        elsewhere(
            "UPDATE apikeys_apikey SET expires_at = now() - interval '1 second' WHERE prefix = %s",
            [api.key.prefix],
        )
        body = assert_envelope(api.get(ME), 401, "unauthorized")
        assert "expired" in body["error"]

    def test_a_kept_key_expires_on_time(self, api):
        """The kept key is built once; its expiry is still checked against the clock on every request."""
        elsewhere(
            "UPDATE apikeys_apikey SET expires_at = now() + interval '1 second' WHERE prefix = %s",
            [api.key.prefix],
        )
        assert key_lookups(api)[1] == 1  # read again with its expiry, and kept
        response, lookups = key_lookups(api)
        assert response.status_code == 200 and lookups == 0
        time.sleep(1.1)
        body = assert_envelope(api.get(ME), 401, "unauthorized")
        assert "expired" in body["error"]

    def test_a_deleted_key_is_refused(self, api):
        elsewhere("DELETE FROM apikeys_apikey WHERE prefix = %s", [api.key.prefix])
        assert_envelope(api.get(ME), 401, "unauthorized")

    def test_a_new_policy_holds_on_the_next_write(self, api):
        AgentMemoryPolicy.objects.create(agent_id="agent-a", max_writes_per_turn=1)
        write = {"userId": "u1", "key": "k", "value": "v", "visibility": "self"}
        assert api.put(MEMORIES, write, format="json", HTTP_X_TURN_ID="t1").status_code == 201
        response = api.put(MEMORIES, {**write, "key": "k2"}, format="json", HTTP_X_TURN_ID="t1")
        assert_envelope(response, 429, "rate_limited")

    def test_a_policy_change_elsewhere_holds_on_the_next_write(self, api):
        AgentMemoryPolicy.objects.create(agent_id="agent-a", max_writes_per_turn=5)
        assert key_lookups(api)[1] == 1  # kept again, with the policy
        write = {"userId": "u1", "key": "k", "value": "v", "visibility": "self"}
        assert api.put(MEMORIES, write, format="json", HTTP_X_TURN_ID="t1").status_code == 201
        elsewhere(
            "UPDATE usermemory_agentmemorypolicy SET max_writes_per_turn = 1 WHERE agent_id = 'agent-a'"
        )
        response = api.put(MEMORIES, {**write, "key": "k2"}, format="json", HTTP_X_TURN_ID="t1")
        assert_envelope(response, 429, "rate_limited")

    def test_an_agent_change_elsewhere_empties_the_cache(self, api):
        elsewhere("UPDATE apikeys_agent SET display_name = 'Renamed' WHERE id = 'agent-a'")
        response, lookups = key_lookups(api)
        assert response.status_code == 200 and lookups == 1

    def test_recording_use_keeps_the_cache(self, api):
        prefix = api.key.prefix
        elsewhere("UPDATE apikeys_apikey SET last_used_at = now() WHERE prefix = %s", [prefix], heard=False)
        elsewhere("UPDATE apikeys_agent SET last_active_at = now() WHERE id = 'agent-a'", heard=False)
        assert key_lookups(api)[1] == 0

    def test_a_new_connection_empties_the_cache(self, api):
        connection.close()
        assert key_lookups(api)[1] == 1
        assert key_lookups(api)[1] == 0

    def test_inside_a_transaction_every_request_looks_up(self, api):
        with transaction.atomic():
            assert key_lookups(api)[1] == 1

    def test_off_by_setting(self, api):
        with override_settings(API_KEY_CACHE=False):
            assert key_lookups(api)[1] == 1
            assert key_lookups(api)[1] == 1
