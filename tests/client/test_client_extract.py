"""``client.extract(user_id, messages)`` (sync and async) over real HTTP against the live server and the
scripted LLM, then a hybrid search that finds the facts: the README's newcomer example."""

import asyncio

import pytest
from memoryplatform_client import BadRequestError, RateLimitedError

from tests.extraction.conftest import fact, facts

FIVE = [
    {"role": "user", "content": "Hi! I'm Ana, I just moved to Lisbon."},
    {"role": "assistant", "content": "Welcome, Ana! How are you settling in?"},
    {"role": "user", "content": "Great. I work as a nurse at the city hospital."},
    {"role": "assistant", "content": "That sounds demanding. Anything you like to eat after a shift?"},
    {"role": "user", "content": "I'm vegetarian, and I love pastel de nata."},
]


def test_extract_then_a_hybrid_search_finds_the_facts(openai_llm, support, client_for):
    nova = client_for(support[0])
    openai_llm.answers = [
        facts(
            fact("home_city", "Lisbon", sources=[0]),
            fact("occupation", "nurse at the city hospital", sources=[2]),
            fact("diet", "vegetarian", category="preference", sources=[4]),
        )
    ]

    done = nova.extract("ana", FIVE)

    assert [o["op"] for o in done["operations"]] == ["ADD", "ADD", "ADD"]
    found = nova.search_memories("ana", "what does she do for work", mode="hybrid")
    best = {f["key"]: f for f in found[:2]}
    assert best["occupation"]["id"] == done["operations"][1]["entryId"]
    history = nova.get_memory_history(best["occupation"]["id"])
    assert history[0]["provenance"]["source"] == "extracted"


def test_a_dry_run_and_a_refusal_through_the_client(openai_llm, support, client_for):
    nova = client_for(support[0])
    openai_llm.answers = [facts(fact("home_city", "Lisbon"))]
    assert nova.extract("ana", FIVE, dry_run=True)["operations"][0]["op"] == "ADD"
    assert nova.list_memories("ana") == []
    with pytest.raises(BadRequestError):
        nova.extract("ana", [])


def test_the_async_client_extracts_too(openai_llm, support, async_client_for):
    openai_llm.answers = [facts(fact("home_city", "Lisbon"))]

    client = async_client_for(support[0])  # the key is made outside the event loop

    async def main() -> dict:
        async with client:
            return await client.extract("ana", FIVE[:1], visibility="group", group_ids=["support"])

    done = asyncio.run(main())
    assert done["operations"][0]["visibility"] == "group" and done["operations"][0]["groupIds"] == ["support"]


def test_the_client_is_told_when_the_agents_llm_budget_is_spent(openai_llm, support, client_for, settings):
    settings.LLM_BUDGET_PER_AGENT = 0.20  # one call (~$0.13 reserved, $0.12 spent); the next is refused
    nova = client_for(support[0])
    openai_llm.answers = [facts(fact("home_city", "Lisbon"))]
    nova.extract("ana", FIVE[:1])

    with pytest.raises(RateLimitedError) as refused:
        nova.extract("ana", FIVE[:1])

    assert refused.value.details["limit"] == "llmBudget" and refused.value.details["spent"] == 0.12
    assert refused.value.retry_after and len(openai_llm.requests) == 1


def test_the_client_extracts_a_stored_conversation_once_and_in_time_order(openai_llm, support, client_for):
    """Issue 46 through the client: ``extract(user_id, conversation_id=...)`` reads the stored messages (none
    sent again), a value written after them is kept (SKIPPED, both times), a second call reads nothing, and
    ``message_ids=`` names the messages; an upsert observed before the stored value comes back skipped."""
    nova = client_for(support[0])
    conversation = nova.create_conversation("ana")
    lisbon = nova.append_message(conversation["id"], "user", "I live in Lisbon.")
    porto = nova.upsert_memory("ana", "home_city", "Porto")  # written after the message
    openai_llm.answers = [facts(fact("home_city", "Lisbon"))]

    done = nova.extract("ana", conversation_id=conversation["id"])

    (op,) = done["operations"]
    assert op["op"] == "SKIPPED" and op["entryId"] == porto["id"] and done["skipped"] == 1
    assert op["storedObservedAt"] == porto["observedAt"] and op["observedAt"] < op["storedObservedAt"]
    assert nova.extract("ana", conversation_id=conversation["id"])["messages"] == 0
    named = nova.extract("ana", conversation_id=conversation["id"], message_ids=[lisbon["id"]])
    assert named["alreadyExtracted"] == [lisbon["id"]] and len(openai_llm.requests) == 1
    older = nova.upsert_memory("ana", "home_city", "Lisbon", observed_at=lisbon["createdAt"])
    assert older["value"] == "Porto" and older["skipped"]["storedObservedAt"] == porto["observedAt"]
