"""``search_user_memories`` by relevance (``hybrid``, the default, and ``semantic``) through real MCP sessions
over stdio and streamable HTTP (``tests/agenttools/mcp_harness.py``), with each role's key: only what the
key's agent sees, at any limit, best first with a score; with the embedder down, full text, said in a second
text block."""

import json

from agenttools.mcp_tools import FULLTEXT_NOTE, UNRERANKED_NOTE
from tests.agenttools.mcp_harness import error, ok, run, sessions, stdio_session
from tests.helpers import free_port
from tests.usermemory.ranked import LIMITS, QUESTION

# The harness's agents: agent-a, in group team, and agent-b, in none.
ENTRIES = {  # key: (writer, visibility, groupIds, value)
    "food_a": ("agent-a", "self", None, "loves spicy ramen"),
    "food_team": ("agent-a", "group", "team", "team lunch: pizza"),
    "pet_a": ("agent-a", "self", None, "has a cat"),
    "food_b": ("agent-b", "self", None, "eats sushi daily"),
    "food_global": ("agent-b", "global", None, "vegetarian diet"),
    "car_global": ("agent-a", "global", None, "drives a Volvo"),
}
SEEN = {
    "agent-a": {"food_a", "food_team", "pet_a", "food_global", "car_global"},
    "agent-b": {"food_b", "food_global", "car_global"},  # not food_team: agent-b is not in team
    "viewer": set(ENTRIES),
    "admin": set(ENTRIES),
}


def test_ranked_search_finds_only_what_the_key_sees_at_any_limit(connect, transport):
    user = f"{transport}-ranked"
    results: list[tuple[str, str | None, int, list[dict]]] = []

    async def main() -> None:
        roles = ("agent-a", "agent-b", "viewer", "admin")
        async with sessions(connect, *roles) as clients:
            writers = dict(zip(roles, clients, strict=True))
            for key, (writer, visibility, groups, value) in ENTRIES.items():
                extra = {"groupIds": groups} if groups else {}
                await ok(
                    writers[writer],
                    "upsert_user_memory",
                    userId=user,
                    key=key,
                    value=value,
                    visibility=visibility,
                    **extra,
                )
            for role, client in writers.items():
                for mode in ("hybrid", "semantic", None):  # None: the default, hybrid
                    for limit in LIMITS:
                        arguments = {"mode": mode} if mode else {}
                        found = await ok(
                            client,
                            "search_user_memories",
                            userId=user,
                            query=QUESTION,
                            limit=limit,
                            **arguments,
                        )
                        results.append((role, mode, limit, found))
            keyword = await ok(
                writers["agent-a"], "search_user_memories", userId=user, query="ramen", mode="keyword"
            )
            results.append(("agent-a", "keyword", 1000, keyword))

    run(main)
    for role, mode, limit, found in results:
        keys = [e["key"] for e in found]
        if mode == "keyword":  # EDDI's literal match, with no score
            assert keys == ["food_a"] and "score" not in found[0]
            continue
        assert set(keys) <= SEEN[role], (role, mode, limit, keys)
        assert len(keys) == len(set(keys)) == min(limit, len(SEEN[role])), (role, mode, limit, keys)
        scores = [e["score"] for e in found]
        assert all(isinstance(s, float) for s in scores) and scores == sorted(scores, reverse=True)


def test_a_write_is_found_by_meaning_at_once_and_the_embedder_down_says_so(mcp_env):
    user = "stdio-ranked-down"
    outcomes: dict[str, object] = {}

    async def main() -> None:
        async with stdio_session(mcp_env, "agent-a") as client:  # the local model: vectors at write
            await ok(client, "upsert_user_memory", userId=user, key="food", value="spicy ramen")
            await ok(client, "upsert_user_memory", userId=user, key="car", value="a red Volvo estate")
            outcomes["up"] = await client.call_tool(
                "search_user_memories", {"userId": user, "query": QUESTION}
            )
        async with stdio_session(mcp_env, "agent-a", EMBEDDINGS_PROVIDER="none") as client:
            for mode in ("hybrid", "semantic"):
                arguments = {"userId": user, "query": "ramen for dinner", "mode": mode}
                outcomes[mode] = await client.call_tool("search_user_memories", arguments)

    run(main)
    up = outcomes["up"]
    assert not up.is_error and len(up.content) == 1  # no note while the embedder is up
    assert [e["key"] for e in json.loads(up.content[0].text)] == ["food", "car"]
    for mode in ("hybrid", "semantic"):
        down = outcomes[mode]
        assert not down.is_error, down
        assert [block.type for block in down.content] == ["text", "text"]
        assert [e["key"] for e in json.loads(down.content[0].text)] == ["food"]
        assert down.content[1].text == FULLTEXT_NOTE


def test_a_reranker_down_is_said_as_such_not_as_search_by_meaning_unavailable(mcp_env):
    """Only the reranker failed (nothing listens at its address): the search was still by meaning, and the
    note says the order lacks the reranker, as the LLM tools' searchMemory does (issue 44, finding 13)."""
    user = "stdio-reranker-down"
    outcomes: dict[str, object] = {}
    dead = f"http://127.0.0.1:{free_port()}"

    async def main() -> None:
        async with stdio_session(mcp_env, "agent-a", RERANK_PROVIDER="http", RERANK_URL=dead) as client:
            await ok(client, "upsert_user_memory", userId=user, key="food", value="spicy ramen")
            outcomes["found"] = await client.call_tool(
                "search_user_memories", {"userId": user, "query": "what does the user like to eat"}
            )

    run(main)
    found = outcomes["found"]
    assert not found.is_error and [block.type for block in found.content] == ["text", "text"]
    assert [e["key"] for e in json.loads(found.content[0].text)] == ["food"]
    assert found.content[1].text == UNRERANKED_NOTE


def test_min_score_and_filters_in_search_user_memories(connect, transport):
    """minScore keeps only what is at least that relevant; the filters narrow inside visibility; a minScore
    outside [0, 1], or with keyword, is refused as a tool error."""
    user = f"{transport}-min-score"
    found: dict[str, list[dict]] = {}
    errors: list[str] = []

    async def main() -> None:
        async with sessions(connect, "agent-a") as (client,):
            for key, value, category in [
                ("native_language", "speaks German and some Spanish", "fact"),
                ("pet", "a grey cat called Moritz", "preference"),
                ("job", "works as a nurse at night", "context"),
            ]:
                await ok(client, "upsert_user_memory", userId=user, key=key, value=value, category=category)
            question = "which language does the user speak"
            found["every"] = await ok(client, "search_user_memories", userId=user, query=question)
            top = found["every"][0]["score"]
            found["top"] = await ok(client, "search_user_memories", userId=user, query=question, minScore=top)
            found["category"] = await ok(
                client, "search_user_memories", userId=user, query="the user", category=["context"]
            )
            found["prefix"] = await ok(
                client, "search_user_memories", userId=user, query="the user", keyPrefix="pe"
            )
            errors.append(await error(client, "search_user_memories", userId=user, query="x", minScore=2))
            errors.append(
                await error(
                    client, "search_user_memories", userId=user, query="x", mode="keyword", minScore=0.5
                )
            )

    run(main)
    assert len(found["every"]) == 3 and all(0 <= e["score"] <= 1 for e in found["every"])
    assert [e["key"] for e in found["top"]] == ["native_language"]
    assert [e["key"] for e in found["category"]] == ["job"]
    assert [e["key"] for e in found["prefix"]] == ["pet"]
    assert "minScore" in errors[0] and "keyword" in errors[1]


def test_the_default_is_the_best_recall_top_k_with_no_cut(connect, transport):
    """By relevance, search_user_memories returns the agent's recallTopK (5) best, with no score cut, even
    for a question about something never said; minScore cuts when given (issue 55)."""
    user = f"{transport}-top-k"
    found: dict[str, list[dict]] = {}
    facts = {
        "home_town": "Hamburg",
        "native_language": "speaks German and some Spanish",
        "pet": "a grey cat called Moritz",
        "job": "works as a nurse at night",
        "coffee": "drinks oat milk flat whites",
        "partner_name": "Tom",
        "car": "a red Volvo estate",
    }

    async def main() -> None:
        async with sessions(connect, "agent-a") as (client,):
            for key, value in facts.items():
                await ok(client, "upsert_user_memory", userId=user, key=key, value=value)
            for name, query in (
                ("answered", "which language does the user speak"),
                ("never", "does the user ski"),
            ):
                found[name] = await ok(client, "search_user_memories", userId=user, query=query)
                found[f"{name} cut"] = await ok(
                    client, "search_user_memories", userId=user, query=query, minScore=0.99
                )
            found["keyword"] = await ok(
                client, "search_user_memories", userId=user, query="a", mode="keyword"
            )

    run(main)
    assert len(found["answered"]) == len(found["never"]) == 5
    assert found["answered"][0]["key"] == "native_language"
    assert found["answered cut"] == found["never cut"] == []
    assert len(found["keyword"]) == 7  # a literal match keeps its own default: every match
