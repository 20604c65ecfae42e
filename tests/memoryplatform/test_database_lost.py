"""A request whose database connection dies under it (a server restart, a crash, ``kill -9``) gets a 503
``unavailable`` in the envelope with ``Retry-After``, never a 500; the next request reconnects."""

import psycopg
import pytest
from django.db import close_old_connections, connection

from tests.helpers import url_of_the_test_database

pytestmark = pytest.mark.django_db(transaction=True)


def _terminate(pid: int) -> None:
    """End one server process from another connection, as a crash of the server would end it."""
    with psycopg.connect(url_of_the_test_database(), autocommit=True) as other:
        other.execute("SELECT pg_terminate_backend(%(pid)s)", {"pid": pid})


def test_a_lost_connection_is_a_503_then_the_next_request_reconnects(agent_a_api):
    assert agent_a_api.get("/usermemorystore/memories/u-lost/count").status_code == 200
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        (pid,) = cursor.fetchone()
    _terminate(pid)

    lost = agent_a_api.get("/usermemorystore/memories/u-lost/count")

    assert lost.status_code == 503
    assert lost.json()["code"] == "unavailable"
    assert lost["Retry-After"] == "1"
    # A server runs this at the end of every request (Django's request_finished signal, which the test client
    # disconnects): the connection that failed is closed, and the next request opens a new one.
    close_old_connections()
    assert agent_a_api.get("/usermemorystore/memories/u-lost/count").status_code == 200
