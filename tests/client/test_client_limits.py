"""The client's side of the one query limit (issue 33, finding 2), against the live server: it knows the
server's limit, refuses a longer query before sending it with the 400 the server would answer, and a tool's
too-long query comes back as the server's refusal text. Nothing reaches the embedder (a scripted server)."""

import pytest
from memoryplatform_client import MAX_QUERY_CHARS as CLIENT_MAX_QUERY_CHARS
from memoryplatform_client import BadRequestError, QueryTooLongError

from memoryplatform.text import MAX_QUERY_CHARS
from tests.embedding_server import inputs, scripted_embedder

pytestmark = pytest.mark.django_db(transaction=True)
U = "user-client-limits"


def test_the_client_knows_the_servers_query_limit():
    assert CLIENT_MAX_QUERY_CHARS == MAX_QUERY_CHARS


def test_a_query_over_the_limit_is_refused_at_once_and_nothing_is_embedded(client_for, support):
    nova, _, _ = support
    mp = client_for(nova)
    conversation = mp.create_conversation(U)["id"]
    too_long, at_limit = "eat " * 103_500, ("what does the user eat? " * 50)[:MAX_QUERY_CHARS]
    with scripted_embedder() as script:
        for call in (
            lambda q: mp.search_memories(U, q, mode="hybrid"),
            lambda q: mp.recall_memories(U, q=q),
            lambda q: mp.get_context(conversation, q=q),
        ):
            with pytest.raises(BadRequestError) as raised:
                call(too_long)
            assert isinstance(raised.value, QueryTooLongError)
            assert raised.value.error == f"q is {len(too_long)} characters; a query may have at most 1000."
            call(at_limit)  # the longest query the server takes goes through
        tool = mp.invoke_tool("searchMemory", U, {"query": too_long})
        assert tool["result"] == (
            f"❌ Invalid arguments for searchMemory: query is {len(too_long)} characters; "
            f"a query may have at most {MAX_QUERY_CHARS}."
        )
    assert too_long not in inputs(script) and inputs(script) == [at_limit] * 3
