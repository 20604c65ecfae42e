"""One limit for queries at the agent doors (issue 33, finding 2): the LLM tools and MCP state
MAX_QUERY_CHARS in their schemas, and refuse a longer query at once, in their own error style, before
anything reaches the embedder (a scripted embedding server that records what it is sent). REST's doors:
``tests/usermemory/test_query_limits.py``."""

from memoryplatform.text import MAX_QUERY_CHARS
from tests.agenttools.mcp_harness import call, ok, run, stdio_session
from tests.embedding_server import inputs, scripted_embedder
from tests.queries import CHINESE, ENGLISH, LIGATURES
from usermemory.models import MAX_KEY_CHARS

U = "user-tool-limits"
HUGE = "what does the user eat? " * 17_250  # 414,000 characters: the repro
AT_LIMIT = ("a question about food " * MAX_QUERY_CHARS)[:MAX_QUERY_CHARS]


def _parameters(tools, name):
    (tool,) = [t["function"] for t in tools if t["function"]["name"] == name]
    return tool["parameters"]["properties"]


# --- The LLM tools ---------------------------------------------------------------------------------------


def test_the_llm_tools_schemas_state_the_limits(agent_a_api, set_policy, agent_a):
    set_policy(agent_a, max_key_length=40, max_value_length=500)
    tools = agent_a_api.get("/v1/tools").json()
    search = _parameters(tools, "searchMemory")
    assert search["query"]["maxLength"] == MAX_QUERY_CHARS and search["query"]["minLength"] == 1
    remember = _parameters(tools, "rememberFact")
    assert remember["key"]["maxLength"] == 40 and remember["value"]["maxLength"] == 500  # the agent's own
    assert remember["category"]["maxLength"] == 64 and remember["source"]["maxLength"] == 200
    assert _parameters(tools, "forgetFact")["key"]["maxLength"] == MAX_KEY_CHARS
    assert _parameters(tools, "createTask")["title"]["maxLength"] == 500


def test_search_memory_refuses_a_query_over_the_limit_as_text_and_embeds_nothing(agent_a_api):
    def invoke(query, mode=None):
        arguments = {"query": query, **({"mode": mode} if mode else {})}
        response = agent_a_api.post(
            "/v1/tools/searchMemory/invoke", {"userId": U, "arguments": arguments}, format="json"
        )
        assert response.status_code == 200, response.content[:300]
        return response.json()["result"]

    with scripted_embedder() as script:
        for query in (HUGE, AT_LIMIT + "x"):
            for mode in (None, "semantic", "keyword"):
                assert invoke(query, mode) == (
                    f"❌ Invalid arguments for searchMemory: query is {len(query)} characters; "
                    f"a query may have at most {MAX_QUERY_CHARS}."
                )
        assert script.requests == []  # refused before the embedder
        assert invoke(AT_LIMIT).startswith("No memories found matching")
        assert inputs(script) == [AT_LIMIT]


# --- MCP -------------------------------------------------------------------------------------------------


def test_mcp_states_the_limit_and_refuses_a_longer_query_before_the_embedder(mcp_env):
    """A real ``manage.py mcp`` whose embedder is the scripted server, with EMBEDDINGS_MAX_CHARS=100."""
    with scripted_embedder() as script:
        server_env = {
            "EMBEDDINGS_PROVIDER": "openai",
            "EMBEDDINGS_URL": script.url,
            "EMBEDDINGS_MODEL": "tiny",
            "EMBEDDINGS_MAX_CHARS": "100",
        }
        refusals: list[tuple[object, bool]] = []
        schemas: dict[str, dict] = {}

        async def main() -> None:
            async with stdio_session(mcp_env, "admin", **server_env) as client:
                listed = (await client.list_tools()).tools
                schemas.update({tool.name: tool.input_schema for tool in listed})
                for query in (HUGE, AT_LIMIT + "x"):
                    for mode in ("hybrid", "semantic", "keyword"):
                        refusals.append(
                            await call(client, "search_user_memories", userId=U, query=query, mode=mode)
                        )
                await ok(client, "search_user_memories", userId=U, query=AT_LIMIT, mode="semantic")

        run(main)
    search = schemas["search_user_memories"]["properties"]["query"]
    assert search["maxLength"] == MAX_QUERY_CHARS
    assert schemas["get_memory_by_key"]["properties"]["key"]["maxLength"] == MAX_KEY_CHARS
    refusal = {"error": f"Invalid arguments: query: must satisfy maxLength {MAX_QUERY_CHARS}"}
    assert refusals == [(refusal, True)] * 6
    assert inputs(script) == [AT_LIMIT[:100]]  # only the query at the limit, and only its head


# --- Tokens (issue 53, finding 12) -----------------------------------------------------------------------


def test_search_memory_refuses_a_query_of_too_many_tokens_as_text(agent_a_api):
    """The local model counts a query's tokens (MAX_QUERY_TOKENS, 448): 500 U+FCDF and 1,000 characters of
    Chinese are refused, in every mode; English of the maximum length is searched."""

    def invoke(query, mode=None):
        arguments = {"query": query, **({"mode": mode} if mode else {})}
        response = agent_a_api.post(
            "/v1/tools/searchMemory/invoke", {"userId": U, "arguments": arguments}, format="json"
        )
        assert response.status_code == 200, response.content[:300]
        return response.json()["result"]

    for query, tokens in ((LIGATURES, 1006), (CHINESE, 642)):
        for mode in (None, "semantic", "keyword"):
            assert invoke(query, mode) == (
                f"❌ Invalid arguments for searchMemory: query is {len(query)} characters but {tokens} "
                "tokens as the embedder reads it; a query may have at most 448 tokens."
            )
    assert invoke(ENGLISH).startswith("No memories found matching")


def test_mcp_refuses_a_query_of_too_many_tokens_before_the_embedder(mcp_env):
    """A real ``manage.py mcp`` whose embedder is the scripted server (a remote model: its tokens estimated,
    four bytes of UTF-8 a token)."""
    with scripted_embedder() as script:
        server_env = {
            "EMBEDDINGS_PROVIDER": "openai",
            "EMBEDDINGS_URL": script.url,
            "EMBEDDINGS_MODEL": "tiny",
        }
        refusals: list[tuple[object, bool]] = []

        async def main() -> None:
            async with stdio_session(mcp_env, "admin", **server_env) as client:
                for query in (LIGATURES, CHINESE):
                    for mode in ("hybrid", "semantic", "keyword"):
                        refusals.append(
                            await call(client, "search_user_memories", userId=U, query=query, mode=mode)
                        )
                await ok(client, "search_user_memories", userId=U, query=ENGLISH, mode="semantic")

        run(main)

    def refusal(characters: int, tokens: int) -> tuple[dict[str, str], bool]:
        reads = f"{tokens} tokens as the embedder reads it"
        return {
            "error": f"query is {characters} characters but {reads}; a query may have at most 448 tokens."
        }, True

    assert refusals == [refusal(500, 500)] * 3 + [refusal(1000, 718)] * 3
    assert inputs(script) == [ENGLISH]  # nothing of the refused queries
