from typing import Any

import factory

from apikeys.models import Agent, AgentGroup


class AgentFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Agent
        django_get_or_create = ("id",)

    id = factory.Sequence(lambda n: f"agent-{n}")
    display_name = factory.LazyAttribute(lambda o: o.id.replace("-", " ").title())
    capabilities = factory.LazyFunction(lambda: ["chat"])
    model = "gpt-test"


class AgentGroupFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = AgentGroup
        django_get_or_create = ("id",)
        skip_postgeneration_save = True

    id = factory.Sequence(lambda n: f"group-{n}")
    name = factory.LazyAttribute(lambda o: o.id)

    @factory.post_generation
    def members(self, create, extracted, **kwargs):  # type: ignore[no-untyped-def]
        if create and extracted:
            self.members.add(*extracted)


class ConversationFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = "conversations.Conversation"

    user_id = factory.Sequence(lambda n: f"user-{n}")
    title = factory.Sequence(lambda n: f"Conversation {n}")


class MessageFactory(factory.django.DjangoModelFactory):
    """A message written straight to the table (tests of reads); real writes go through the services."""

    class Meta:
        model = "conversations.Message"

    conversation = factory.SubFactory(ConversationFactory)
    seq = factory.Sequence(lambda n: n + 1)
    position = factory.SelfAttribute("seq")
    channel = "history"
    role = "user"
    content = factory.LazyFunction(lambda: [{"type": "text", "text": "hello"}])
    session_id = "session-1"


def _memory_value_text(entry) -> str:  # type: ignore[no-untyped-def]
    from usermemory.services import value_as_text

    return value_as_text(entry.value)


def _now():  # type: ignore[no-untyped-def]
    from django.utils import timezone

    return timezone.now()


class MemoryEntryFactory(factory.django.DjangoModelFactory):
    """An entry written straight to the table (Dream and read tests); real writes go through the services.

    ``group`` entries get no MemoryEntryGroup rows here; ``value_text`` follows ``value``, and the search
    columns follow both.
    """

    class Meta:
        model = "usermemory.MemoryEntry"

    user_id = "user-1"
    key = factory.Sequence(lambda n: f"key-{n}")
    value = "a value"
    value_text = factory.LazyAttribute(_memory_value_text)
    key_folded = factory.LazyAttribute(lambda entry: entry.key.casefold())
    text_folded = factory.LazyAttribute(lambda entry: entry.value_text.casefold())
    category = "fact"
    visibility = "self"
    source_agent = factory.SubFactory(AgentFactory)
    created_at = factory.LazyFunction(_now)
    updated_at = factory.LazyAttribute(lambda o: o.created_at)
    last_accessed_at = None


class AgentMemoryPolicyFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = "usermemory.AgentMemoryPolicy"
        django_get_or_create = ("agent",)

    agent = factory.SubFactory(AgentFactory)


def policy_set(agent: Any, **fields: Any) -> dict[str, Any]:
    """Set fields of an agent's policy, each in the table of the part that holds it (usermemory's, Dream's,
    extraction's, activity's), as stored values, without the service's checks; returns each part's row by
    the part's name (the rows of parts none of ``fields`` names too)."""
    from usermemory.policies import policy_parts

    unknown = set(fields) - {name for part in policy_parts() for name in part.fields}
    assert not unknown, f"no policy part holds {sorted(unknown)}"
    rows = {}
    for part in policy_parts():
        mine = {name: value for name, value in fields.items() if name in part.fields}
        rows[part.name], _ = part.model._default_manager.update_or_create(pk=agent.pk, defaults=mine)
    return rows
