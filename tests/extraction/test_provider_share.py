"""A slow provider stalls no other agent (issue 53, finding 5): in a real ``manage.py serve`` (4 request
threads), one agent's extract calls against an LLM that does not answer hold at most
``PROVIDER_CALLS_PER_AGENT`` threads; its calls past that are a 429 at once, and another agent's read is
answered while the held calls are still open."""

import json
import os
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

from apikeys.services import agent_create, apikey_create
from tests.extraction.conftest import fact, facts
from tests.helpers import (
    HANG_GUARD_SECONDS,
    free_port,
    stop_process_group,
    url_of_the_test_database,
    wait_ready,
)
from tests.llm_server import LLMScript, llm_server

BASE_DIR = Path(settings.BASE_DIR)
SHARE = 2  # PROVIDER_CALLS_PER_AGENT of the server
CALLS = 4  # as many as the server has request threads
CHAT = [{"role": "user", "content": "I moved to Lisbon last month.", "id": "m1"}]


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: Any


def call(base: str, method: str, path: str, key: str, body: object = None) -> Answer:
    request = urllib.request.Request(  # noqa: S310
        base + path,
        data=json.dumps(body).encode() if body is not None else None,
        method=method,
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
            raw, status, got = response.read(), response.status, dict(response.headers)
    except urllib.error.HTTPError as exc:
        raw, status, got = exc.read(), exc.code, dict(exc.headers)
    return Answer(status, {k.lower(): v for k, v in got.items()}, json.loads(raw))


@pytest.fixture
def held_llm() -> Iterator[tuple[LLMScript, threading.Event]]:
    release = threading.Event()
    script = LLMScript([facts(fact("home_city", "Lisbon"))])
    script.answers[0].hold = release
    with llm_server(script):
        try:
            yield script, release
        finally:
            release.set()


@pytest.fixture
def server(transactional_db, held_llm, tmp_path) -> Iterator[str]:
    script, _ = held_llm
    (tmp_path / "metrics").mkdir()
    env = {
        **os.environ,
        "SECRET_KEY": settings.SECRET_KEY,
        "DEBUG": "false",
        "DATABASE_URL": url_of_the_test_database(),
        "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "metrics"),
        "LLM_PROVIDER": "openai",
        "LLM_URL": script.url,
        "LLM_MODEL": "test-model",
        "LLM_TIMEOUT": "300",
        "PROVIDER_CALLS_PER_AGENT": str(SHARE),
    }
    for name in ("REDIS_URL", "DATABASE_POOLER", "DATABASE_LISTEN_URL", "DATABASE_REPLICA_URL"):
        env.pop(name, None)
    port = free_port()
    log_path = tmp_path / "serve.log"
    argv = ["manage.py", "serve", "--port", str(port), "--workers", "1", "--threads", str(CALLS)]
    with log_path.open("w") as log:
        process = subprocess.Popen(  # noqa: S603
            [sys.executable, *argv, "--no-background"],
            cwd=BASE_DIR,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_ready(process, f"http://127.0.0.1:{port}", log_path)
        yield f"http://127.0.0.1:{port}"
    finally:
        stop_process_group(process)


def test_a_hanging_llm_holds_only_its_agents_share_of_the_threads(server, held_llm):
    script, release = held_llm
    for agent in ("agent-a", "agent-b"):
        agent_create(agent_id=agent)
    flooding = apikey_create(role="agent", agent_id="agent-a")[1]
    other = apikey_create(role="agent", agent_id="agent-b")[1]
    extract = "/usermemorystore/memories/u1/extract"

    with ThreadPoolExecutor(max_workers=CALLS) as pool:
        calls: list[Future[Answer]] = [
            pool.submit(call, server, "POST", extract, flooding, {"messages": CHAT}) for _ in range(CALLS)
        ]
        for _ in range(SHARE):  # the agent's share reached the model, which holds them
            arrived = script.received.acquire(timeout=HANG_GUARD_SECONDS)
            assert arrived, "an extract call never reached the LLM"

        refused: list[Future[Answer]] = []
        pending = set(calls)
        while len(refused) < CALLS - SHARE:  # the calls past the share are answered while the others hang
            done, pending = wait(pending, timeout=HANG_GUARD_SECONDS, return_when=FIRST_COMPLETED)
            assert done, "no call past the agent's share was answered while its calls hung"
            refused.extend(done)
        for future in refused:
            answer = future.result()
            assert answer.status == 429, answer.body
            assert answer.body["code"] == "rate_limited"
            assert "PROVIDER_CALLS_PER_AGENT" in answer.body["error"]
            assert answer.headers["retry-after"] == "1"

        visible = call(server, "GET", "/usermemorystore/memories/u1/visible", other)
        assert visible.status == 200, visible.body  # another agent is served ...
        assert not release.is_set() and not any(f.done() for f in pending)  # ... while those calls hang
        assert len(script.requests) == SHARE  # nothing past the share was sent

        release.set()
        for future in pending:
            assert future.result().status == 200
