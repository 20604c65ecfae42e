"""Role fixtures: one API client per role, each with a real key, so a permission boundary is one line.

The suite runs in parallel (``make test``: pytest-xdist workers, each with a test database of its own on the
one PostgreSQL server; ``PARALLEL=0`` runs it serially). A test stays parallel-safe when it names nothing
fixed: a port from ``tests.helpers.free_port``, files under ``tmp_path``, its database from
``url_of_the_test_database()`` (never the settings' name), and a DATA_DIR of its own for a server of its own.
A test that needs a live server shares one (tests/helpers.py says how)."""

import os
from collections.abc import Callable
from urllib.parse import quote, urlsplit

import pytest
from rest_framework.test import APIClient

from apikeys.models import Agent, ApiKey
from apikeys.services import apikey_create
from config import celery_app
from tests.factories import AgentFactory, AgentGroupFactory, policy_set
from tests.helpers import Broker, database_broker
from usermemory.models import AgentMemoryPolicy

# The test process enqueues into its own memory: a write's nudge reaches no broker. The tests of real workers
# (tests/memoryplatform/test_celery_workers.py) point it at theirs (the ``worker`` fixture).
celery_app.conf.broker_url = "memory://localhost/"
celery_app.conf.broker_transport_options = {}


class KeyedClient(APIClient):
    """An API client that sends one real key; ``raw_key`` and ``key`` say which."""

    raw_key: str = ""
    key: ApiKey | None = None
    agent: Agent | None = None


def _client_for(role: str, agent: Agent | None = None, **key_options: object) -> KeyedClient:
    key, raw_key = apikey_create(role=role, agent_id=agent.id if agent else None, **key_options)  # type: ignore[arg-type]
    client = KeyedClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw_key}")
    client.raw_key, client.key, client.agent = raw_key, key, agent
    return client


@pytest.fixture
def make_api_client(db: None) -> Callable[..., KeyedClient]:
    return _client_for


@pytest.fixture
def agent_a(db: None) -> Agent:
    agent = AgentFactory(id="agent-a", display_name="Agent A")
    AgentGroupFactory(id="team", members=[agent])
    return agent


@pytest.fixture
def agent_b(db: None) -> Agent:
    return AgentFactory(id="agent-b", display_name="Agent B")


@pytest.fixture
def agent_a_api(agent_a: Agent) -> KeyedClient:
    return _client_for(ApiKey.Role.AGENT, agent_a)


@pytest.fixture
def agent_b_api(agent_b: Agent) -> KeyedClient:
    return _client_for(ApiKey.Role.AGENT, agent_b)


@pytest.fixture
def viewer_api(db: None) -> KeyedClient:
    return _client_for(ApiKey.Role.VIEWER)


@pytest.fixture
def admin_api(db: None) -> KeyedClient:
    return _client_for(ApiKey.Role.ADMIN)


@pytest.fixture
def anon_api() -> APIClient:
    return APIClient()


@pytest.fixture
def set_policy():
    def _set(agent: Agent, **fields) -> AgentMemoryPolicy:
        """Stored policy values, each in its part's table; returns usermemory's part."""
        return policy_set(agent, **fields)["memory"]

    return _set


@pytest.fixture(autouse=True)
def _listen_on_the_test_database(settings):  # type: ignore[no-untyped-def]
    """With DATABASE_LISTEN_URL (the suite behind PgBouncer, .ci/behind_pgbouncer.py), the process's listener
    connects to the test database, whose name pytest-django chose, on the server that URL names."""
    if settings.DATABASE_LISTEN_URL:
        from django.db import connection

        url = urlsplit(settings.DATABASE_LISTEN_URL)
        name = quote(connection.settings_dict["NAME"])
        settings.DATABASE_LISTEN_URL = url._replace(path=f"/{name}").geturl()


@pytest.fixture(autouse=True)
def _short_texts_embedded_in_their_request(settings):  # type: ignore[no-untyped-def]
    """The suite's writes of short texts get their vectors in their request (EMBEDDINGS_INLINE_MAX_CHARS), so
    a search right after a write finds it by meaning without a consumer running; the default (0: every
    vector from the background consumer) has tests of its own (tests/usermemory/test_vector_queue.py)."""
    settings.EMBEDDINGS_INLINE_MAX_CHARS = 48


@pytest.fixture(params=["postgresql", "redis"])
def broker(request: pytest.FixtureRequest) -> Broker:
    """Each broker a worker runs on: the embedded default's (kombu's SQLAlchemy transport on the test
    database) and Redis (REDIS_URL; skipped without it, unless REQUIRE_REDIS=1, as CI sets), emptied first."""
    if request.param == "redis":
        url = os.environ.get("REDIS_URL", "")
        if not url:
            if os.environ.get("REQUIRE_REDIS") == "1":
                pytest.fail("REQUIRE_REDIS=1 but REDIS_URL is not set")
            pytest.skip("REDIS_URL is not set: no Redis to run a worker on")
        # A short visibility timeout, looked for every second: a message a dead worker held comes back within
        # seconds.
        env = {"REDIS_URL": url, "CELERY_VISIBILITY_TIMEOUT": "5", "CELERY_RESTORE_INTERVAL": "1"}
        redis = Broker("redis", url, env)
        redis.purge()
        return redis
    return database_broker()
