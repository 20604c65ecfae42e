"""The hand-written key lookup gives the same key, agent and memory policy as the ORM loads, in one query."""

import pytest

from apikeys import store
from apikeys.services import apikey_authenticate, apikey_create
from usermemory.models import AgentMemoryPolicy

pytestmark = pytest.mark.django_db


def _fields(instance) -> dict:  # type: ignore[no-untyped-def]
    return {f.attname: getattr(instance, f.attname) for f in instance._meta.concrete_fields}


def test_the_lookup_loads_key_agent_and_policy_as_the_orm_does(agent_a, django_assert_num_queries):
    agent_a.capabilities = ["search", {"nested": [1, 2]}]  # JSON: converted as the ORM converts it
    agent_a.save()
    policy = AgentMemoryPolicy.objects.create(agent=agent_a, max_entries_per_user=7)
    key, raw = apikey_create(role="agent", agent_id=agent_a.id, label="t")
    apikey_authenticate(raw_key=raw)  # first use: records the last-used times
    key.refresh_from_db()

    with django_assert_num_queries(1):  # the lookup only (in a transaction: the cache is not used)
        built = apikey_authenticate(raw_key=raw)
        loaded_policy = built.agent.memory_policy
    assert _fields(loaded_policy) == _fields(AgentMemoryPolicy.objects.get(pk=policy.pk))

    assert _fields(built) == _fields(key)
    assert _fields(built.agent) == _fields(type(agent_a).objects.get(pk=agent_a.pk))
    assert built.agent.capabilities == ["search", {"nested": [1, 2]}]
    assert not built._state.adding and built._state.db == "default"


def test_an_agent_without_a_policy_is_known_to_have_none_without_a_query(agent_a, django_assert_num_queries):
    AgentMemoryPolicy.objects.filter(agent=agent_a).delete()
    _, raw = apikey_create(role="agent", agent_id=agent_a.id, label="t")
    apikey_authenticate(raw_key=raw)  # first use: records the last-used times
    with django_assert_num_queries(1):
        built = apikey_authenticate(raw_key=raw)
        with pytest.raises(AgentMemoryPolicy.DoesNotExist):
            built.agent.memory_policy  # noqa: B018 (the access is the test)


def test_an_unknown_prefix_finds_nothing():
    assert store.key_lookup(prefix="nosuchprefix") is None
