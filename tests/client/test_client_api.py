"""The sync and async clients over real HTTP: every part of the API the issue lists, with the keys' rules
enforced by the server and its refusals raised as typed exceptions carrying the envelope."""

import asyncio

import pytest
from memoryplatform_client import (
    AsyncMemoryPlatform,
    BadRequestError,
    NotFoundError,
    PermissionDeniedError,
    memory_input,
    message_input,
)

pytestmark = pytest.mark.django_db(transaction=True)


def test_memories_round_trip(client_for, support):
    nova, aniza, _ = support
    mp = client_for(nova)
    created = mp.upsert_memory(
        "org/u 1", "preferred_language", "German", category="preference", visibility="global"
    )
    assert created["visibility"] == "global" and created["sourceAgentId"] == "nova"
    mp.upsert_memory("org/u 1", "diet", "vegetarian", category="preference", turn_id="t1")
    batch = mp.upsert_memories(
        [
            memory_input(
                "org/u 1",
                "city",
                "Lisbon",
                {"category": "fact", "visibility": "group", "group_ids": ["support"]},
            ),
            memory_input("org/u 1", "pet", "a cat named Miso", {}),
        ]
    )
    assert [entry["key"] for entry in batch] == ["city", "pet"]

    assert mp.count_memories("org/u 1") == 4
    assert mp.get_memory_by_key("org/u 1", "diet")["value"] == "vegetarian"
    assert {e["key"] for e in mp.list_memories_by_category("org/u 1", "preference")} == {
        "preferred_language",
        "diet",
    }
    assert [e["key"] for e in mp.search_memories("org/u 1", "LISBON", mode="keyword")] == ["city"]
    # a newcomer's first search: hybrid by default, so a question finds its answer first
    first = mp.search_memories("org/u 1", "which language does the user speak")
    assert first[0]["key"] == "preferred_language" and 0 <= first[0]["score"] <= 1
    ranked = mp.search_memories("org/u 1", "which animal lives with the user")
    assert ranked[0]["key"] == "pet" and "score" in ranked[0]
    relevant = mp.search_memories("org/u 1", "which animal lives with the user", min_score=ranked[0]["score"])
    assert [e["key"] for e in relevant] == ["pet"]
    by_category = mp.search_memories("org/u 1", "the user", category=["preference"], min_score=0)
    assert {e["key"] for e in by_category} == {"preferred_language", "diet"}
    assert len(mp.recall_memories("org/u 1", order="most_recent", limit=2)) == 2
    for mode in ("hybrid", "semantic"):  # recall by relevance: best first, with scores
        recalled = mp.recall_memories("org/u 1", q="which animal lives with the user", mode=mode, limit=2)
        assert recalled[0]["key"] == "pet" and len(recalled) == 2, recalled
        assert recalled[0]["score"] >= recalled[1]["score"]

    # Another agent of the group sees the global and the group entries, not nova's own.
    other = client_for(aniza)
    assert {e["key"] for e in other.list_memories("org/u 1")} == {"preferred_language", "city"}
    with pytest.raises(NotFoundError) as missing:
        other.get_memory_by_key("org/u 1", "diet")
    assert missing.value.status == 404 and missing.value.code == "not_found"
    assert "diet" in missing.value.error
    with pytest.raises(PermissionDeniedError) as refused:
        other.delete_memory(created["id"])
    assert refused.value.code == "forbidden"

    history = mp.get_memory_history(created["id"])
    assert [event["action"] for event in history] == ["created"]
    mp.delete_memory(created["id"])
    with pytest.raises(NotFoundError):
        mp.get_memory_history(created["id"])


def test_bad_input_is_a_bad_request_with_the_envelopes_details(client_for, support):
    mp = client_for(support[0])
    with pytest.raises(BadRequestError) as refused:
        mp.upsert_memories([memory_input("u1", "ok", 1, {}), memory_input("u1", "", 2, {})])
    assert refused.value.status == 400 and refused.value.code == "bad_request"
    assert refused.value.details.get("index") == 1


def test_properties_export_and_erasure(client_for, support):
    mp = client_for(support[0])
    admin = client_for(role="admin")
    assert mp.get_properties("u2") == {}
    assert mp.set_properties("u2", {"name": "Ada", "plan": "pro"}) == {"name": "Ada", "plan": "pro"}
    assert mp.get_properties("u2")["plan"] == "pro"
    mp.create_conversation("u2", title="billing")
    with pytest.raises(PermissionDeniedError):
        mp.export_user("u2")
    exported = admin.export_user("u2")
    assert exported["format"] == 4
    erased = admin.erase_user("u2")
    assert erased["entriesDeleted"] == 2
    assert mp.get_properties("u2") == {}
    mp.set_properties("u2", {"name": "Ada"})
    mp.delete_properties("u2")
    assert mp.count_memories("u2") == 0


def test_conversations_cursors_sync_checkpoint_context(client_for, support):
    nova, aniza, outsider = support
    mp = client_for(nova)
    conversation = mp.create_conversation("u3", title="order", group_id="support")
    cid = conversation["id"]
    assert mp.get_conversation(cid)["groupId"] == "support"
    assert [c["id"] for c in mp.iter_conversations(user_id="u3", limit=1)] == [cid]

    mp.append_message(cid, "user", "hello")
    mp.append_messages(cid, [message_input("assistant", f"reply {n}", {}) for n in range(4)], session_id="s1")
    page = mp.list_messages(cid, limit=2)
    assert len(page["data"]) == 2 and page["nextCursor"] == page["data"][1]["id"]
    everything = list(mp.iter_messages(cid, limit=2))
    assert [m["content"][0]["text"] for m in everything] == [
        "hello",
        "reply 0",
        "reply 1",
        "reply 2",
        "reply 3",
    ]
    assert {m["sessionId"] for m in everything[1:]} == {"s1"}

    synced = mp.sync_memory(cid, [{"role": "user", "content": [{"type": "text", "text": "a"}]}])
    assert synced["memoryEpoch"] == 1 and not synced["noOp"]
    assert mp.sync_memory(cid, [{"role": "user", "content": [{"type": "text", "text": "a"}]}])["noOp"]

    assert mp.get_checkpoint(cid)["lastEntryId"] is None
    context = mp.get_context(cid)
    assert context["agentId"] == "nova" and context["memory"]["memoryEpoch"] == 1
    assert len(context["history"]) == 5

    with pytest.raises(NotFoundError):  # outside the group, the conversation is not found (issue 33)
        client_for(outsider).list_messages(cid)


def test_case_log_helpers(client_for, support):
    nova, aniza, _ = support
    mp, other = client_for(nova), client_for(aniza)
    cid = mp.create_conversation("u4", group_id="support")["id"]
    other.append_message(cid, "assistant", "Aniza: refund requested", channel="summary")
    other.append_message(cid, "assistant", "Aniza: refund approved", channel="summary")

    read = [entry["content"][0]["text"] for entry in mp.case_log_since_checkpoint(cid, page_size=1)]
    assert read == ["Aniza: refund requested", "Aniza: refund approved"]
    assert list(mp.case_log_since_checkpoint(cid)) == []  # the checkpoint moved past them

    summary = mp.checkpoint_and_summarise(cid, "Nova: shipped the replacement", session_id="s-9")
    assert summary["channel"] == "summary" and summary["sessionId"] == "s-9"
    assert mp.get_checkpoint(cid)["lastEntryId"] == summary["id"]
    # Aniza has read nothing yet: she gets all three, in order.
    assert [e["agentId"] for e in other.case_log_since_checkpoint(cid)] == ["aniza", "aniza", "nova"]
    other.append_message(cid, "assistant", "Aniza: closed", channel="summary")
    assert [e["content"][0]["text"] for e in mp.case_log_since_checkpoint(cid)] == ["Aniza: closed"]


def test_a_consumer_that_stops_early_reads_the_entry_again(client_for, support):
    mp = client_for(support[0])
    cid = mp.create_conversation("u5")["id"]
    for text in ("one", "two"):
        mp.append_message(cid, "assistant", text, channel="summary")
    for entry in mp.case_log_since_checkpoint(cid):
        assert entry["content"][0]["text"] == "one"
        break
    assert [e["content"][0]["text"] for e in mp.case_log_since_checkpoint(cid)] == ["one", "two"]


def test_agents_groups_keys_and_tools(client_for, support, server_url):
    admin = client_for(role="admin")
    agent = admin.create_agent("scout", display_name="Scout", capabilities=["search"], groups=["support"])
    assert agent["id"] == "scout" and agent["groups"] == ["support"]
    assert admin.update_agent("scout", status="idle")["status"] == "idle"
    assert admin.get_agent("scout")["memoryPolicy"]["maxRecallEntries"] == 50
    assert "scout" in {a["id"] for a in admin.list_agents(limit=100)["results"]}
    admin.create_group("ops", name="Ops", members=["scout"])
    assert admin.add_group_members("ops", ["nova"])["members"] == ["nova", "scout"]
    admin.remove_group_member("ops", "nova")
    assert admin.get_group("ops")["members"] == ["scout"]
    assert "ops" in {g["id"] for g in admin.list_groups()["results"]}

    made = admin.create_agent_key("scout", label="ci")
    assert made["key"].startswith("mp_")
    assert [k["prefix"] for k in admin.list_agent_keys("scout")["results"]] == [made["prefix"]]
    with MemoryPlatform_for(server_url, made["key"]) as scout:
        assert scout.get_me()["id"] == "scout"
        assert {tool["function"]["name"] for tool in scout.list_tools()} >= {"rememberFact", "recallMemories"}
        result = scout.invoke_tool(
            "rememberFact", "u6", {"key": "color", "value": "blue", "category": "preference"}, turn_id="t1"
        )
        assert result["result"].startswith("✅")
        assert scout.get_memory_by_key("u6", "color")["value"] == "blue"
        admin.revoke_key(made["prefix"])
        with pytest.raises(Exception) as revoked:
            scout.get_me()
        assert getattr(revoked.value, "code", None) == "unauthorized"


def MemoryPlatform_for(url: str, key: str):  # noqa: N802 (reads as the class it returns)
    from memoryplatform_client import MemoryPlatform

    return MemoryPlatform(url, key, max_retries=0)


def test_async_client_has_the_same_calls(async_client_for, support):
    mp: AsyncMemoryPlatform = async_client_for(support[0])  # the key is made outside the event loop

    async def scenario() -> None:
        async with mp:
            await mp.upsert_memory("u7", "tea", "green", category="preference")
            assert [e["key"] for e in await mp.search_memories("u7", "tea")] == ["tea"]
            assert await mp.count_memories("u7") == 1
            cid = (await mp.create_conversation("u7"))["id"]
            for text in ("a", "b", "c"):
                await mp.append_message(cid, "user", text)
            texts = [m["content"][0]["text"] async for m in mp.iter_messages(cid, limit=2)]
            assert texts == ["a", "b", "c"]
            entry = await mp.checkpoint_and_summarise(cid, "all good")
            assert (await mp.get_checkpoint(cid))["lastEntryId"] == entry["id"]
            assert [e async for e in mp.case_log_since_checkpoint(cid)] == []
            with pytest.raises(NotFoundError):
                await mp.get_memory_by_key("u7", "coffee")

    asyncio.run(scenario())
