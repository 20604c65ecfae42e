"""LangGraph's :func:`extraction_node` writes the facts where the graph reads them: as items of the graph's
namespace (LangGraph's docs' ``(user_id, "memories")`` by default, or any layout the store takes), over real
HTTP, with the scripted LLM proposing the facts."""

import pytest
from django.contrib.auth.models import User
from django.urls import reverse
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.store.base import BaseStore
from memoryplatform_client.errors import BadRequestError
from memoryplatform_client.langgraph import MemoryPlatformStore, extraction_node

from extraction.models import Extraction
from tests.extraction.conftest import fact, facts
from tests.extraction.test_admin import _cells
from tests.helpers import internal_id, public_id

pytestmark = pytest.mark.django_db(transaction=True)

DOCS = ("u1", "memories")


def run_turn(node, user_text: str, reply: str = "Noted.", **configurable: str) -> None:
    """One turn of a graph (the agent's reply, then the node) for ``configurable``."""

    def agent(state: MessagesState) -> dict:
        return {"messages": [{"role": "assistant", "content": reply}]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("remember", node)
    graph.add_edge(START, "agent")
    graph.add_edge("agent", "remember")
    graph.add_edge("remember", END)
    graph.compile().invoke(
        {"messages": [{"role": "user", "content": user_text}]}, {"configurable": configurable}
    )


def test_the_facts_are_items_of_the_docs_namespace(openai_llm, client_for, support):
    nova = client_for(support[0])
    openai_llm.answers = [
        facts(fact("diet", "vegetarian"), fact("home_city", "Lisbon", category="context", confidence=0.7))
    ]

    run_turn(extraction_node(nova), "I'm vegetarian and I live in Lisbon.", user_id="u1")

    store = MemoryPlatformStore(nova)
    found = {(i.namespace, i.key, i.value) for i in store.search(DOCS)}
    assert found == {(DOCS, "diet", "vegetarian"), (DOCS, "home_city", "Lisbon")}
    assert store.get(DOCS, "home_city").value == "Lisbon"
    assert [i.key for i in store.search(DOCS, query="where does the user live", limit=1)] == ["home_city"]
    entries = {e["key"]: e for e in nova.list_memories("u1")}
    assert set(entries) == {"memories/diet", "memories/home_city"}  # no bare keys beside them
    city = entries["memories/home_city"]
    assert (city["category"], city["visibility"], city["source"], city["confidence"]) == (
        "context",
        "self",
        "extracted",
        0.7,
    )
    assert len(openai_llm.requests) == 1  # one call to the model


def test_a_later_turn_updates_the_item_and_an_unchanged_fact_writes_nothing(openai_llm, client_for, support):
    nova = client_for(support[0])
    node = extraction_node(nova)
    openai_llm.answers = [facts(fact("home_city", "Lisbon"))]
    run_turn(node, "I live in Lisbon.", user_id="u1")
    stored = nova.get_memory_by_key("u1", "memories/home_city")

    # The model is shown the stored fact under its platform key, and reuses that key: the same item.
    openai_llm.answers = [facts(fact("memories/home_city", "Porto"))]
    run_turn(node, "I moved to Porto.", user_id="u1")
    assert "memories/home_city" in openai_llm.requests[1]["messages"][-1]["content"]
    item = MemoryPlatformStore(nova).get(DOCS, "home_city")
    assert item.value == "Porto"
    assert nova.get_memory_by_key("u1", "memories/home_city")["id"] == stored["id"]

    openai_llm.answers = [facts(fact("home_city", "porto "))]  # says it again: nothing to write
    run_turn(node, "Porto is great.", user_id="u1")
    assert [e["action"] for e in nova.get_memory_history(stored["id"])] == ["created", "updated"]
    assert [e["key"] for e in nova.list_memories("u1")] == ["memories/home_city"]


def test_any_layout_the_store_takes(openai_llm, client_for, support):
    nova, aniza, _ = support
    api = client_for(nova)
    openai_llm.answers = [facts(fact("tone", "short answers"))]
    layout = ("{user_id}", "chitchat", "prefs")  # the user where no "memories" says so: user_index
    with pytest.raises(ValueError, match="user_index"):
        run_turn(extraction_node(api, namespace=layout), "Keep it short.", user_id="u2")
    store = MemoryPlatformStore(api, user_index=0)
    run_turn(extraction_node(api, namespace=layout, store=store), "Keep it short.", user_id="u2")
    openai_llm.answers = [facts(fact("name", "Ada"))]
    shared = ("memories", "{user_id}", "group", "support")  # the platform's first layout, a group's
    run_turn(extraction_node(api, namespace=shared), "I'm Ada.", user_id="u2")

    prefs = ("u2", "chitchat", "prefs")
    assert [(i.namespace, i.key, i.value) for i in store.search(prefs)] == [(prefs, "tone", "short answers")]
    assert MemoryPlatformStore(api).get(("memories", "u2", "group", "support"), "name").value == "Ada"
    # The group's other agent reads the group's fact, not nova's own.
    theirs = MemoryPlatformStore(client_for(aniza), user_index=0)
    group = ("memories", "u2", "group", "support")
    assert MemoryPlatformStore(client_for(aniza)).get(group, "name").value == "Ada"
    assert theirs.get(prefs, "tone") is None


def test_nothing_without_the_namespaces_names_and_no_scope_beside_the_namespace(
    openai_llm, client_for, support
):
    nova = client_for(support[0])
    openai_llm.answers = [facts(fact("diet", "vegetarian"))]
    run_turn(extraction_node(nova), "I'm vegetarian.")  # no user_id in the run's configurable
    run_turn(extraction_node(nova, namespace=("{team}", "memories")), "I'm vegetarian.", user_id="u1")
    assert openai_llm.requests == []

    with pytest.raises(ValueError, match="namespace decides visibility"):
        extraction_node(nova, visibility="global")

    run_turn(extraction_node(nova, dry_run=True), "I'm vegetarian.", user_id="u1")
    assert len(openai_llm.requests) == 1 and nova.list_memories("u1") == []


def test_the_graphs_store_decides_where_the_user_is(openai_llm, client_for, support):
    nova = client_for(support[0])
    store = MemoryPlatformStore(nova, user_index=1)
    openai_llm.answers = [facts(fact("diet", "vegetarian"))]

    def agent(state: MessagesState) -> dict:
        return {"messages": [{"role": "assistant", "content": "Noted."}]}

    def recall(state: MessagesState, *, store: BaseStore) -> dict:
        items = store.search(("users", "u5", "memories"))
        return {"messages": [{"role": "assistant", "content": f"{i.key}: {i.value}"} for i in items]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("remember", extraction_node(nova, namespace=("users", "{user_id}", "memories")))
    graph.add_node("recall", recall)
    graph.add_edge(START, "agent")
    graph.add_edge("agent", "remember")
    graph.add_edge("remember", "recall")
    graph.add_edge("recall", END)
    done = graph.compile(store=store).invoke(
        {"messages": [{"role": "user", "content": "I'm vegetarian."}]}, {"configurable": {"user_id": "u5"}}
    )

    assert done["messages"][-1].content == "diet: vegetarian"  # the graph read it back from its store
    assert [e["key"] for e in nova.list_memories("u5")] == ["users/memories/diet"]
    assert nova.list_memories("users") == []


def test_the_nodes_facts_carry_the_extractions_provenance_and_the_admin_shows_no_dry_run(
    openai_llm, client_for, support, client
):
    """Issue 56, finding 3: the node's writes are one real extraction's, as every door's: each fact's
    history names the model, the extraction and the messages, and the admin shows a run that wrote."""
    nova = client_for(support[0])
    openai_llm.answers = [
        facts(fact("diet", "vegetarian"), fact("home_city", "Lisbon", sources=[0, 1], category="context"))
    ]

    run_turn(
        extraction_node(nova), "I'm vegetarian and I live in Lisbon.", reply="Lisbon, noted.", user_id="u1"
    )

    entries = {e["key"]: e for e in nova.list_memories("u1")}
    assert set(entries) == {"memories/diet", "memories/home_city"}
    (written,) = nova.get_memory_history(entries["memories/home_city"]["id"])
    provenance = written["provenance"]
    assert provenance is not None
    assert (provenance["model"], provenance["source"], provenance["messageIndexes"]) == (
        "test-model",
        "extracted",
        [0, 1],
    )
    record = Extraction.objects.get()
    assert provenance["extraction"] == public_id(record.pk, "extraction")
    assert (record.dry_run, record.facts_added, record.model) == (False, 2, "test-model")

    staff = User.objects.create_superuser("boss", "boss@example.com", "pw-for-tests-only")
    client.force_login(staff)
    listed = client.get(reverse("admin:extraction_extraction_changelist")).content.decode()
    assert _cells(listed, "dry_run_flag") == [""] and _cells(listed, "facts") == ["2 added"]
    entry_page = client.get(
        reverse("admin:usermemory_memoryentry_change", args=[internal_id(entries["memories/diet"]["id"])])
    ).content.decode()
    assert "test-model" in entry_page
    assert reverse("admin:extraction_extraction_change", args=[record.pk]) in entry_page


def test_the_extract_door_places_facts_under_a_key_prefix_compared_only_there(
    openai_llm, client_for, support
):
    """``key_prefix``: the facts' keys go under it, a key reused from there stays as it is, and a stored fact
    elsewhere (another key, or the prefix's key in another scope) is neither shown nor updated."""
    nova = client_for(support[0])
    nova.upsert_memory("u1", "home_city", "Porto")
    nova.upsert_memory("u1", "memories/diet", "vegan", visibility="global")
    openai_llm.answers = [facts(fact("home_city", "Lisbon"), fact("memories/diet", "vegetarian"))]

    done = nova.extract(
        "u1", [{"role": "user", "content": "I live in Lisbon; vegetarian."}], key_prefix="memories/"
    )

    assert [(o["op"], o["key"]) for o in done["operations"]] == [
        ("ADD", "memories/home_city"),
        ("ADD", "memories/diet"),
    ]
    prompt = openai_llm.requests[0]["messages"][-1]["content"]
    assert "Porto" not in prompt and "vegan" not in prompt  # not of the place: not shown
    assert nova.get_memory_by_key("u1", "home_city")["value"] == "Porto"
    stored = {(e["key"], e["visibility"]): e["value"] for e in nova.list_memories("u1")}
    assert (
        stored[("memories/diet", "global")] == "vegan" and stored[("memories/diet", "self")] == "vegetarian"
    )

    for bad in ("memories", "", "x" * 300 + "/"):
        with pytest.raises(BadRequestError, match="keyPrefix"):
            nova.extract("u1", [{"role": "user", "content": "hi"}], key_prefix=bad)
    assert len(openai_llm.requests) == 1  # refused before any call
