import pytest

from apikeys.models import Agent
from tests.usermemory.mcp_harness import connect, http_url, mcp_env, transport, wsgi_url  # noqa: F401 (fixtures)
from usermemory.models import AgentMemoryPolicy

BASE = "/usermemorystore/memories"


@pytest.fixture
def put():
    """PUT one entry through REST: ``put(client, userId=..., key=..., value=..., **more)``."""

    def _put(client, headers=None, **body):
        return client.put(BASE, body, format="json", headers=headers or {})

    return _put


@pytest.fixture
def set_policy():
    def _set(agent: Agent, **fields) -> AgentMemoryPolicy:
        policy, _ = AgentMemoryPolicy.objects.update_or_create(agent=agent, defaults=fields)
        return policy

    return _set
