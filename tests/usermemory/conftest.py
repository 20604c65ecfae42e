import pytest

from tests.factories import AgentFactory, AgentGroupFactory
from tests.usermemory.ranked import ENTRIES, U

BASE = "/usermemorystore/memories"


@pytest.fixture
def put():
    """PUT one entry through REST: ``put(client, userId=..., key=..., value=..., **more)``."""

    def _put(client, headers=None, **body):
        return client.put(BASE, body, format="json", headers=headers or {})

    return _put


@pytest.fixture
def matrix(
    agent_a, agent_b, agent_a_api, agent_b_api, make_api_client, put, django_capture_on_commit_callbacks
):
    """The entries of ``tests.usermemory.ranked.ENTRIES`` for user ``U``, with their vectors, and an agent
    client per writer: ``a`` and ``b``, and ``c``, a member of ``team`` (with ``a``) who wrote nothing;
    ``b`` alone is in ``bteam``. Who sees what: ``ranked.SEEN``."""
    teammate = AgentFactory(id="agent-c")
    AgentGroupFactory(id="team", members=[agent_a, teammate])
    AgentGroupFactory(id="bteam", members=[agent_b])
    writers = {"a": agent_a_api, "b": agent_b_api}
    with django_capture_on_commit_callbacks(execute=True):  # each write's own after-commit embedding
        for key, (writer, visibility, group, value) in ENTRIES.items():
            extra = {"groupIds": [group]} if group else {}
            response = put(writers[writer], userId=U, key=key, value=value, visibility=visibility, **extra)
            assert response.status_code == 201, response.content
    return {**writers, "c": make_api_client("agent", teammate)}
