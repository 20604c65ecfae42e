"""The LangGraph store over real HTTP: put, get, search (with a query), delete and list_namespaces behave
as LangGraph documents them for a ``BaseStore``; namespaces map to the user's self, global and group
memories. Values are short, so that they get their vector within the write (EMBEDDINGS_INLINE_MAX_CHARS)
and a search by meaning finds them at once."""

import asyncio

import pytest
from memoryplatform_client import PermissionDeniedError
from memoryplatform_client.langgraph import MemoryPlatformStore

pytestmark = pytest.mark.django_db(transaction=True)

MINE = ("memories", "u1")
GLOBAL = ("memories", "u1", "global")
SUPPORT = ("memories", "u1", "group", "support")


def test_put_get_search_delete_list_namespaces(client_for, support):
    nova, aniza, _ = support
    store = MemoryPlatformStore(client_for(nova))
    store.put(MINE, "food", {"likes": "pizza", "rating": 5})
    store.put(MINE, "sport", {"likes": "climbing", "rating": 3})
    store.put(GLOBAL, "name", {"first": "Ada"})
    store.put(SUPPORT, "ticket", {"open": "kettle"})

    item = store.get(MINE, "food")
    assert item is not None
    assert (item.namespace, item.key, item.value) == (MINE, "food", {"likes": "pizza", "rating": 5})
    assert item.created_at <= item.updated_at
    assert store.get(MINE, "nothing") is None
    assert store.get(GLOBAL, "food") is None  # the key is in another namespace

    store.put(MINE, "food", {"likes": "sushi", "rating": 4})  # put again: an update
    assert store.get(MINE, "food").value == {"likes": "sushi", "rating": 4}

    found = store.search(("memories", "u1"), query="which sport does the user practise", limit=2)
    assert found[0].key == "sport" and found[0].namespace == MINE and found[0].score is not None
    assert len(found) == 2
    assert [i.key for i in store.search(MINE, filter={"rating": {"$gte": 4}})] == ["food"]
    assert [i.key for i in store.search(SUPPORT)] == ["ticket"]
    newest_first = ["food", "ticket", "name", "sport"]  # food was updated last
    assert [i.key for i in store.search(("memories", "u1"))] == newest_first
    assert [i.key for i in store.search(("memories", "u1"), limit=2, offset=1)] == newest_first[1:3]

    assert store.list_namespaces(prefix=("memories", "u1")) == [MINE, GLOBAL, SUPPORT]
    assert store.list_namespaces(prefix=("memories", "u1"), suffix=("global",)) == [GLOBAL]
    assert store.list_namespaces(prefix=("memories", "u1"), max_depth=3) == [
        MINE,
        ("memories", "u1", "global"),
        ("memories", "u1", "group"),
    ]

    # Another agent of the group: the global and the group entries, not nova's own.
    theirs = MemoryPlatformStore(client_for(aniza))
    assert theirs.get(MINE, "food") is None
    assert theirs.get(GLOBAL, "name").value == {"first": "Ada"}
    assert theirs.get(SUPPORT, "ticket").value == {"open": "kettle"}

    store.delete(MINE, "food")
    assert store.get(MINE, "food") is None
    store.delete(MINE, "food")  # deleting what is gone is no error
    # A namespace is a prefix of the deeper ones (LangGraph's rule): ("memories", "u1") holds them all.
    assert [i.key for i in store.search(MINE)] == ["ticket", "name", "sport"]

    with pytest.raises(ValueError, match="namespace"):
        store.put(("notes", "u1"), "k", {"v": 1})


def test_a_group_namespace_is_the_groups_members_only(client_for, support):
    nova, _, outsider = support
    MemoryPlatformStore(client_for(nova)).put(SUPPORT, "ticket", {"open": "kettle"})
    theirs = MemoryPlatformStore(client_for(outsider))
    with pytest.raises(PermissionDeniedError) as refused:
        theirs.put(SUPPORT, "ticket", {"open": "forged"})
    assert refused.value.code == "forbidden"
    assert theirs.get(GLOBAL, "ticket") is None
    assert theirs.search(("memories", "u1")) == []


def test_async_batch(client_for, async_client_for, support):
    nova = support[0]
    store = MemoryPlatformStore(client_for(nova), async_client_for(nova))

    async def scenario() -> None:
        await store.aput(MINE, "drink", {"likes": "green tea"})
        assert (await store.aget(MINE, "drink")).value == {"likes": "green tea"}
        found = await store.asearch(("memories", "u1"), query="tea")
        assert [i.key for i in found] == ["drink"]
        assert await store.alist_namespaces(prefix=("memories", "u1")) == [MINE]
        await store.adelete(MINE, "drink")
        assert await store.aget(MINE, "drink") is None
        await store.async_client.close()

    asyncio.run(scenario())
