"""The client's integration tests: the real client over real HTTP against the live server the suite starts
(pytest-django's ``live_server``, on the test database), one real key per agent."""

from collections.abc import Callable, Iterator

import pytest
from memoryplatform_client import AsyncMemoryPlatform, MemoryPlatform

from apikeys.models import Agent, ApiKey
from tests.extraction.conftest import openai_llm  # noqa: F401 (a fixture: the scripted LLM)
from tests.factories import AgentFactory, AgentGroupFactory


@pytest.fixture
def support(db: None) -> tuple[Agent, Agent, Agent]:
    """Two agents of the group ``support`` (nova and aniza) and one outside it."""
    nova = AgentFactory(id="nova", display_name="Nova")
    aniza = AgentFactory(id="aniza", display_name="Aniza")
    outsider = AgentFactory(id="outsider", display_name="Outsider")
    AgentGroupFactory(id="support", members=[nova, aniza])
    return nova, aniza, outsider


@pytest.fixture
def key_for(make_api_client: Callable[..., object]) -> Callable[..., str]:
    """A real raw key: ``key_for(agent)`` for an agent key, ``key_for(role="admin")`` for another role."""

    def _key(agent: Agent | None = None, role: str = ApiKey.Role.AGENT) -> str:
        return make_api_client(role, agent).raw_key  # type: ignore[attr-defined]

    return _key


@pytest.fixture
def server_url(live_server) -> str:  # type: ignore[no-untyped-def]
    return str(live_server.url)


@pytest.fixture
def client_for(server_url: str, key_for: Callable[..., str]) -> Iterator[Callable[..., MemoryPlatform]]:
    """A sync client with a real key (closed after the test)."""
    made: list[MemoryPlatform] = []

    def _client(agent: Agent | None = None, role: str = ApiKey.Role.AGENT) -> MemoryPlatform:
        client = MemoryPlatform(server_url, key_for(agent, role), max_retries=0)
        made.append(client)
        return client

    yield _client
    for client in made:
        client.close()


@pytest.fixture
def async_client_for(server_url: str, key_for: Callable[..., str]) -> Callable[..., AsyncMemoryPlatform]:
    """An async client with a real key; each test's event loop closes its own (``async with``)."""

    def _client(agent: Agent | None = None, role: str = ApiKey.Role.AGENT) -> AsyncMemoryPlatform:
        return AsyncMemoryPlatform(server_url, key_for(agent, role), max_retries=0)

    return _client
