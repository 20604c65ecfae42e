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
