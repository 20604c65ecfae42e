"""The key cache with ``DATABASE_LISTEN_URL`` (behind a transaction pooler): the process's one listening
connection, not the Django connections, hears the changes, and the request after it has heard is refused;
while the listening connection is down the cache is not used. (tests/memoryplatform/test_pgbouncer.py sends
the next request at once, over HTTP, to another process, as a client would.)

The listen module's own API (``memoryplatform.listen``) is tested here too, as another component uses it."""

import time

import psycopg
import pytest
from django.db import connection

from apikeys import keycache
from memoryplatform import listen
from tests.apikeys.test_key_cache import ME, _commit_elsewhere, elsewhere, key_lookups
from tests.helpers import assert_envelope, url_of_the_test_database
from usermemory.models import AgentMemoryPolicy

pytestmark = pytest.mark.django_db(transaction=True)
NAME = "memoryplatform-keycache-test"  # not the process's own listener's (it may run, behind PgBouncer)


@pytest.fixture
def listener(settings, monkeypatch):
    settings.DATABASE_LISTEN_URL = settings.DATABASE_LISTEN_URL or url_of_the_test_database()  # direct
    fresh = listen.Listener(
        [keycache.CHANNEL],
        on_notify=keycache.hear,
        on_reset=keycache.ROWS.clear,
        name=NAME,
        retry_seconds=0.1,
        heartbeat_seconds=0.2,
    )
    monkeypatch.setattr(keycache, "LISTENER", fresh)
    connection.close()  # the next Django connection opens under the setting
    yield fresh
    fresh.stop(timeout=10)


def _until(condition, seconds=10.0):
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline
        time.sleep(0.02)


@pytest.fixture
def api(listener, agent_a_api):
    """An agent's client whose key is kept, once the listener has connected."""
    agent_a_api.get(ME)  # starts the listener; records the key's first use
    _until(lambda: listener.connected)
    assert key_lookups(agent_a_api)[1] == 1  # kept
    assert key_lookups(agent_a_api)[1] == 0
    return agent_a_api


def _listener_backends() -> list[int]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = %s AND datname = current_database()",
            [NAME],
        )
        return [pid for (pid,) in cursor.fetchall()]


def test_only_the_listener_connection_listens(api):
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_listening_channels()")
        assert cursor.fetchone() == (0,)
    assert len(_listener_backends()) == 1


def test_a_revocation_committed_elsewhere_refuses_the_next_request(api):
    elsewhere("UPDATE apikeys_apikey SET revoked_at = now() WHERE prefix = %s", [api.key.prefix])
    body = assert_envelope(api.get(ME), 401, "unauthorized")
    assert "revoked" in body["error"]


@pytest.fixture
def policy(agent_a):
    """A policy made before the listener starts (it hears only what commits after its LISTEN)."""
    return AgentMemoryPolicy.objects.create(agent=agent_a, max_writes_per_turn=5)


def test_a_policy_change_elsewhere_empties_the_cache(policy, api):
    elsewhere("UPDATE usermemory_agentmemorypolicy SET max_writes_per_turn = 1 WHERE agent_id = 'agent-a'")
    assert key_lookups(api)[1] == 1


def test_recording_use_keeps_the_cache(api):
    elsewhere(
        "UPDATE apikeys_apikey SET last_used_at = now() WHERE prefix = %s", [api.key.prefix], heard=False
    )
    assert key_lookups(api)[1] == 0


def test_while_the_listener_is_down_the_cache_is_not_used(api, listener, settings):
    (pid,) = _listener_backends()
    settings.DATABASE_LISTEN_URL = "postgres://nobody@127.0.0.1:1/none"  # it cannot reconnect for now
    _commit_elsewhere("SELECT pg_terminate_backend(%s)", [pid])
    _until(lambda: not listener.connected)
    assert [key_lookups(api)[1] for _ in range(2)] == [1, 1]  # nothing kept
    _commit_elsewhere("UPDATE apikeys_apikey SET revoked_at = now() WHERE prefix = %s", [api.key.prefix])
    assert_envelope(api.get(ME), 401, "unauthorized")  # heard by nobody, and refused


def test_a_reconnected_listener_empties_the_cache(api, listener):
    (pid,) = _listener_backends()
    generation = keycache.ROWS.generation
    _commit_elsewhere("SELECT pg_terminate_backend(%s)", [pid])
    _until(lambda: listener.connected and _listener_backends() not in ([], [pid]))
    assert keycache.ROWS.generation > generation
    assert key_lookups(api)[1] == 1  # kept again from here
    assert key_lookups(api)[1] == 0


def test_notifications_waits_for_the_first_and_takes_the_rest():
    with listen.listening("memoryplatform_test") as conn:
        assert listen.notifications(conn, timeout=0.05) == []
        _commit_elsewhere(
            "SELECT pg_notify('memoryplatform_test', 'one'), pg_notify('memoryplatform_test', 'two')", []
        )
        received = listen.notifications(conn, timeout=5)
        assert [(n.channel, n.payload) for n in received] == [
            ("memoryplatform_test", "one"),
            ("memoryplatform_test", "two"),
        ]


def test_listening_connects_where_the_listen_url_says(settings):
    settings.DATABASE_LISTEN_URL = "postgres://nobody@127.0.0.1:1/none"
    with pytest.raises(psycopg.OperationalError), listen.listening("memoryplatform_test"):
        pass
