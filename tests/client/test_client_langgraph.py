"""The LangGraph store over real HTTP: put, get, search (with a query), delete and list_namespaces behave
as LangGraph documents them for a ``BaseStore``; namespaces map to the user's self, global and group
memories, in both of LangGraph's layouts; values round-trip; TTLs expire and refresh; search is narrowed by
the server. Values are short, so that they get their vector within the write (EMBEDDINGS_INLINE_MAX_CHARS)
and a search by meaning finds them at once."""

import asyncio
from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from django.utils import timezone
from memoryplatform_client import MemoryPlatform, PermissionDeniedError
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

    for bad in ((), ("memories", "*"), ("u1", "")):
        with pytest.raises(ValueError, match="(?i)namespace|user_index"):
            store.put(bad, "k", {"v": 1})


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


DOCS = ("u2", "memories")  # LangGraph's docs: (user_id, "memories")


def test_the_docs_namespace_layout_and_values_as_put(client_for, support):
    nova = support[0]
    store = MemoryPlatformStore(client_for(nova))
    first = MemoryPlatformStore(client_for(nova), user_index=0)  # the user first, whatever follows
    store.put(DOCS, "food", {"likes": "pizza"})
    store.put(DOCS, "note", "a plain string")
    store.put(DOCS, "a/b%c", [1, 2])  # a key with the separator and the escape character
    first.put(("u2", "chitchat", "prefs"), "tone", {"short": True})
    store.put(("u2", "memories", "global"), "name", {"first": "Ada"})
    assert store.get(DOCS, "food").value == {"likes": "pizza"}
    # The other layout of LangGraph's docs names the same place, as its own spelling (issue 56).
    store.put(("memories", "u2"), "food", {"likes": "soup"})
    assert store.get(DOCS, "food").value == store.get(("memories", "u2"), "food").value == {"likes": "soup"}
    assert store.get(("memories", "u2"), "food").namespace == ("memories", "u2")
    note = store.get(DOCS, "note")
    assert note.value == "a plain string" and note.namespace == DOCS  # a string stays a string
    assert store.get(DOCS, "a/b%c").value == [1, 2]

    # On the platform: userId, the labels as the key's prefix, the store's category.
    stored = {(e["key"], e["category"], e["visibility"]) for e in client_for(nova).list_memories("u2")}
    assert stored == {
        ("memories/food", "fact", "self"),
        ("memories/note", "fact", "self"),
        ("memories/a%2Fb%25c", "fact", "self"),
        ("chitchat/prefs/tone", "fact", "self"),
        ("memories/name", "fact", "global"),
    }
    # And back: each item under the namespace it was put in, whatever the prefix searched.
    found = {(i.namespace, i.key) for i in first.search(("u2",), limit=20)}
    assert found == {
        (DOCS, "food"),
        (DOCS, "note"),
        (DOCS, "a/b%c"),
        (("u2", "chitchat", "prefs"), "tone"),
        (("u2", "memories", "global"), "name"),
    }
    assert {i.key for i in store.search(DOCS)} == {"food", "note", "a/b%c", "name"}
    assert [i.key for i in store.search(("u2", "memories", "global"))] == ["name"]
    assert [i.key for i in first.search(("u2", "chitchat"))] == ["tone"]
    assert first.search(("u2", "chit")) == []  # a label is whole, not a text prefix
    assert first.list_namespaces(prefix=("u2",)) == [
        ("u2", "chitchat", "prefs"),
        DOCS,
        ("u2", "memories", "global"),
    ]
    store.delete(DOCS, "note")
    assert store.get(DOCS, "note") is None and store.get(DOCS, "food") is not None


class Recording(httpx.HTTPTransport):
    """The real transport, noting each request's path and query and how many items each list answer had."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[str, dict[str, list[str]], int | None]] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        response.read()
        body = response.json() if response.headers.get("content-type") == "application/json" else None
        url = urlsplit(str(request.url))
        self.seen.append((url.path, parse_qs(url.query), len(body) if isinstance(body, list) else None))
        return response


def test_search_sends_query_filter_and_limit_to_the_server(server_url, key_for, support, set_policy):
    nova = support[0]
    set_policy(nova, max_writes_per_turn=50)
    recording = Recording()
    with MemoryPlatform(server_url, key_for(nova), max_retries=0, transport=recording) as client:
        store = MemoryPlatformStore(client)
        store.put(DOCS, "old", {"kind": "trip", "stars": 5})
        for n in range(12):  # newer entries that do not match
            store.put(DOCS, f"new{n}", {"kind": "chore", "stars": n % 3})
        recording.seen.clear()

        found = store.search(DOCS, filter={"kind": "trip", "stars": {"$gte": 4}}, limit=1)
        assert [(i.key, i.value) for i in found] == [("old", {"kind": "trip", "stars": 5})]
        ranked = store.search(DOCS, query="a trip", filter={"kind": "trip"}, limit=3)
        assert [i.key for i in ranked] == ["old"] and ranked[0].score is not None
        page = store.search(DOCS, filter={"kind": "chore"}, limit=4, offset=2)
        assert [i.key for i in page] == ["new9", "new8", "new7", "new6"]

    reads = [seen for seen in recording.seen if seen[0].startswith("/usermemorystore/memories/u2")]
    assert [(path.rsplit("/", 1)[-1], items) for path, _, items in reads] == [
        ("u2", 1),
        ("search", 1),
        ("u2", 4),
    ]  # one request each, answered with the page only: no client-side scan
    listing, search, paged = (params for _, params, _ in reads)
    assert listing["filter"] == ['{"kind":"trip","stars":{"$gte":4}}']
    assert listing["keyPrefix"] == ["memories/"] and listing["limit"] == ["1"]
    assert search["q"] == ["a trip"] and search["mode"] == ["hybrid"] and search["limit"] == ["3"]
    assert paged["offset"] == ["2"]


def test_a_ttl_expires_an_item_and_a_read_refreshes_it(client_for, support, monkeypatch):
    nova = support[0]
    store = MemoryPlatformStore(client_for(nova), ttl={"default_ttl": 60, "refresh_on_read": True})
    with monkeypatch.context() as clock:  # written two hours ago, for a minute: expired since
        clock.setattr(timezone, "now", lambda: datetime.now(tz=UTC) - timedelta(hours=2))
        store.put(DOCS, "mood", {"is": "tired"}, ttl=1)
    store.put(DOCS, "plan", {"is": "gym"})  # the store's default_ttl: an hour
    store.put(DOCS, "name", {"is": "Ada"}, ttl=None)  # no TTL
    api = client_for(nova)
    plan = api.get_memory_by_key("u2", "memories/plan")
    valid = datetime.fromisoformat(plan["validTo"]) - datetime.fromisoformat(plan["validFrom"])
    assert valid == timedelta(hours=1)
    assert api.get_memory_by_key("u2", "memories/name")["validTo"] is None

    assert store.get(DOCS, "mood", refresh_ttl=False) is None
    assert {i.key for i in store.search(DOCS)} == {"plan", "name"}
    assert "mood" not in {i.key for i in store.search(DOCS, query="mood tired")}
    assert store.list_namespaces(prefix=("u2", "memories")) == [DOCS]
    plan = api.get_memory_by_key("u2", "memories/plan")  # as the reads above refreshed it

    later = datetime.now(tz=UTC) + timedelta(minutes=30)
    with monkeypatch.context() as clock:  # read half an hour on: the hour starts again then
        clock.setattr(timezone, "now", lambda: later)
        assert store.get(DOCS, "plan", refresh_ttl=False).value == {"is": "gym"}
        assert api.get_memory_by_key("u2", "memories/plan")["validTo"] == plan["validTo"]
        assert store.get(DOCS, "plan").value == {"is": "gym"}
    renewed = datetime.fromisoformat(api.get_memory_by_key("u2", "memories/plan")["validTo"])
    assert renewed == later + timedelta(hours=1)
    assert api.refresh_ttl("u2", [plan["id"]]) == 1


def test_user_index_names_the_user_wherever_the_layout_puts_it(client_for, support):
    api = client_for(support[0])
    store = MemoryPlatformStore(api, user_index=1)
    store.put(("profiles", "u3"), "name", {"first": "Ada"})
    store.put(("profiles", "u4"), "name", {"first": "Bo"})
    store.put(("users", "u3", "memories"), "food", {"likes": "soup"})
    store.put(("users", "u3", "memories", "global"), "city", "Lisbon")

    # Each user is the platform's user (not one user "profiles" or "users" for everyone).
    assert {(e["key"], e["visibility"]) for e in api.list_memories("u3")} == {
        ("profiles/name", "self"),
        ("users/memories/food", "self"),
        ("users/memories/city", "global"),
    }
    assert [e["key"] for e in api.list_memories("u4")] == ["profiles/name"]
    assert api.list_memories("profiles") == [] and api.list_memories("users") == []

    assert store.get(("profiles", "u4"), "name").value == {"first": "Bo"}
    assert store.get(("profiles", "u3"), "name").value == {"first": "Ada"}
    found = {(i.namespace, i.key) for i in store.search(("users", "u3"))}
    assert found == {(("users", "u3", "memories"), "food"), (("users", "u3", "memories", "global"), "city")}
    assert store.list_namespaces(prefix=("profiles", "u3")) == [("profiles", "u3")]
    assert store.list_namespaces(prefix=("users", "u3")) == [
        ("users", "u3", "memories"),
        ("users", "u3", "memories", "global"),
    ]
    store.delete(("profiles", "u3"), "name")
    assert store.get(("profiles", "u3"), "name") is None and store.get(("profiles", "u4"), "name") is not None
    for bad in (("u3",), ("profiles", "*")):
        with pytest.raises(ValueError, match="position 1 \\(user_index\\)"):
            store.put(bad, "k", {"v": 1})
    with pytest.raises(ValueError, match="position 1"):
        store.search(("profiles",))  # a prefix must name the user
    with pytest.raises(ValueError, match="0 or more"):
        MemoryPlatformStore(api, user_index=-1)


def test_without_user_index_a_layout_that_hides_its_user_is_refused(client_for, support):
    api = client_for(support[0])
    store = MemoryPlatformStore(api)
    # The layouts of LangGraph's docs that say where the user is: next to "memories".
    store.put(("memories", "u7"), "food", {"likes": "soup"})
    store.put(("u7", "memories"), "drink", {"likes": "tea"})
    store.put(("u7", "memories", "work"), "employer", {"name": "Acme"})
    assert {e["key"] for e in api.list_memories("u7")} == {
        "memories/food",
        "memories/drink",
        "memories/work/employer",
    }
    # The others are refused before any request, naming the option; none lands on a user "profiles".
    hiding = (("profiles", "u7"), ("users", "u7", "memories"), ("u7", "prefs"), ("u7",), ("*", "memories"))
    for hidden in hiding:
        with pytest.raises(ValueError, match=r"user_index=N") as refused:
            store.put(hidden, "name", {"first": "Ada"})
        assert repr(hidden) in str(refused.value)
    with pytest.raises(ValueError, match="user_index"):
        store.search(("profiles", "u7"))
    with pytest.raises(ValueError, match="user_index"):
        store.list_namespaces(prefix=("users", "u7"))
    assert api.list_memories("profiles") == [] and api.list_memories("users") == []
    assert api.count_memories("u7") == 3


def test_list_namespaces_with_wildcards_matched_by_the_server(server_url, key_for, support, set_policy):
    nova = support[0]
    set_policy(nova, max_writes_per_turn=20)
    recording = Recording()
    client = MemoryPlatform(server_url, key_for(nova), max_retries=0, transport=recording)
    store = MemoryPlatformStore(client, user_index=0)
    for namespace in (
        ("u6", "memories"),
        ("u6", "chitchat", "prefs"),
        ("u6", "travel", "prefs"),
        ("u6", "memories", "global"),
        ("u6", "memories", "group", "support"),
        ("u6", "travel", "group", "support"),
    ):
        store.put(namespace, "-".join(namespace), {"v": 1})
    for n in range(8):  # entries no wildcard below matches but the last
        store.put(("u6", "archive", f"box{n}"), "item", {"v": n})
    recording.seen.clear()

    # LangGraph's MatchCondition: "*" matches any one element, in the prefix and in the suffix.
    assert store.list_namespaces(prefix=("u6", "*", "prefs")) == [
        ("u6", "chitchat", "prefs"),
        ("u6", "travel", "prefs"),
    ]
    # The server matched the wildcard (keyPattern: the labels, or a group "prefs" of no labels): its answer
    # held the two entries, not the user's 14.
    path, params, answered = recording.seen[-1]
    assert params["keyPattern"] == ["*/prefs/**/*", "*"] and answered == 2
    assert store.list_namespaces(prefix=("u6", "*")) == store.list_namespaces(prefix=("u6",))
    assert len(store.list_namespaces(prefix=("u6",))) == 14
    assert store.list_namespaces(prefix=("u6",), suffix=("*", "prefs")) == [
        ("u6", "chitchat", "prefs"),
        ("u6", "travel", "prefs"),
    ]
    assert recording.seen[-1][2] == 2  # the suffix's labels too: "**/prefs/*"
    assert store.list_namespaces(prefix=("u6",), suffix=("group", "*")) == [
        ("u6", "memories", "group", "support"),
        ("u6", "travel", "group", "support"),
    ]
    assert store.list_namespaces(prefix=("u6", "*", "group", "*")) == [
        ("u6", "memories", "group", "support"),
        ("u6", "travel", "group", "support"),
    ]
    assert store.list_namespaces(prefix=("u6", "memories", "*")) == [
        ("u6", "memories", "global"),
        ("u6", "memories", "group", "support"),
    ]
    assert store.list_namespaces(prefix=("u6", "*", "global")) == [("u6", "memories", "global")]
    assert store.list_namespaces(prefix=("u6", "*"), max_depth=2) == [
        ("u6", "archive"),
        ("u6", "chitchat"),
        ("u6", "memories"),
        ("u6", "travel"),
    ]
    assert store.list_namespaces(prefix=("u6", "archive", "*"), limit=2, offset=1) == [
        ("u6", "archive", "box1"),
        ("u6", "archive", "box2"),
    ]
    assert store.list_namespaces(prefix=("u6", "*", "nothing")) == []
    assert recording.seen[-1][2] == 0
    # LangGraph's docs' spelling ("memories", user, ...): "memories" is a label like the others (issue 56).
    docs = MemoryPlatformStore(client)
    assert docs.list_namespaces(prefix=("memories", "u6", "*")) == [
        ("memories", "u6", "global"),
        ("memories", "u6", "group", "support"),
    ]
    assert docs.list_namespaces(prefix=("memories", "u6", "*", "prefs")) == []
    with pytest.raises(ValueError, match="user_index"):
        store.list_namespaces(prefix=("*", "memories"))  # every user: not one store's question
    client.close()


def test_a_store_has_no_turns_so_a_loop_of_puts_meets_no_turn_limit(client_for, support):
    api = client_for(support[0])  # the default policy: 10 memory writes per turn
    store = MemoryPlatformStore(api)
    for n in range(60):
        store.put(DOCS, f"item{n}", {"n": n})
    assert api.count_memories("u2") == 60
    assert store.get(DOCS, "item59").value == {"n": 59}

    # The LLM's limit stands: its tool's writes of one turn (here: the last 60 s, no turn id) stop at 10,
    # the store's writes a moment ago taking none of them.
    said = [
        api.invoke_tool("rememberFact", "u2", {"key": f"fact{n}", "value": "x", "category": "fact"})["result"]
        for n in range(11)
    ]
    assert all(text.startswith("✅") for text in said[:10])
    assert "10 memory writes per turn" in said[10] and api.count_memories("u2") == 70


LAYOUTS = [  # each documented layout, with the store option it needs
    (("u8", "memories"), None),
    (("memories", "u8"), None),
    (("memories", "u8", "prefs"), None),
    (("u8", "memories", "global"), None),
    (("memories", "u8", "group", "support"), None),
    (("profiles", "u8"), 1),
    (("users", "u8", "memories"), 1),
    (("u8", "chitchat", "prefs"), 0),
]


@pytest.mark.parametrize(("namespace", "user_index"), LAYOUTS, ids=["/".join(ns) for ns, _ in LAYOUTS])
def test_each_documented_layout_round_trips(client_for, support, namespace, user_index):
    """A put, then search and get, give back the namespace put (issue 56: ``(u, "memories")`` came back
    from ``search(("memories", u))`` as ``("memories", u, "memories")``)."""
    store = MemoryPlatformStore(client_for(support[0]), user_index=user_index)
    store.put(namespace, "diet", {"eats": "vegetables"})

    assert store.get(namespace, "diet").namespace == namespace
    assert [(i.namespace, i.key) for i in store.search(namespace)] == [(namespace, "diet")]
    if user_index is None:  # LangGraph's docs' two spellings name one place, each answered as asked
        other = (namespace[1], namespace[0], *namespace[2:])
        assert [(i.namespace, i.key) for i in store.search(other)] == [(other, "diet")]


def test_a_reserved_word_where_the_user_is_is_refused(client_for, support):
    """With ``user_index=0``, ``("memories", "u-77")`` wrote to the user ``memories`` (issue 56); a word
    the layouts reserve is never a user: refused before any request."""
    api = client_for(support[0])
    first = MemoryPlatformStore(api, user_index=0)
    store = MemoryPlatformStore(api)
    for refused_by, namespace in (
        (first, ("memories", "u-77")),
        (first, ("global", "u-77")),
        (first, ("group", "support")),
        (store, ("memories", "memories")),
        (store, ("memories", "global")),
        (store, ("group", "memories")),
    ):
        with pytest.raises(ValueError, match="reserves") as refused:
            refused_by.put(namespace, "x", {"v": 1})
        assert repr(namespace) in str(refused.value)
        with pytest.raises(ValueError, match="reserves"):
            refused_by.search(namespace)
    assert api.list_memories("memories") == [] and api.list_memories("global") == []
    assert api.list_memories("group") == []
