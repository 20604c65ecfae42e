"""The LLM's settings, written once in the settings file, reach the processes nobody starts with them (issue
46): the stdio MCP server an MCP client starts from its own directory with only the key in its
environment, and ``manage.py extract_conversations`` run by hand. The file is ``ENV_FILE`` here (the
checkout's ``.env`` is the developer's); its reading from any directory:
tests/memoryplatform/test_env_file.py."""

import json
import subprocess
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.agenttools.mcp_harness import BASE_DIR, PYTHON, McpEnv, ok, run
from tests.extraction.conftest import PRICES, fact, facts
from tests.llm_server import LLMScript, llm_server

MANAGE = str(BASE_DIR / "manage.py")
AGENT = "settings-file-agent"
PROVISION = f"""
from apikeys.caller import Caller
from apikeys.services import agent_create, apikey_create
from conversations.services import MessageWrite, conversation_create, message_append
from usermemory.services import policy_update
agent = agent_create(agent_id={AGENT!r})
policy_update(agent_id=agent.id, extract_from_conversations=True)
key, raw_key = apikey_create(role="agent", agent_id={AGENT!r})
caller = Caller.for_key(key)
conversation = conversation_create(caller=caller, user_id="porto-user")
text = [{{"type": "text", "text": "I live in Porto."}}]
message_append(caller=caller, conversation_id=str(conversation.id),
               writes=[MessageWrite(channel="history", role="user", content=text)])
print("KEY=" + raw_key)
"""


@pytest.fixture(scope="module")
def agent_key(mcp_env: McpEnv) -> str:
    """An agent of its own that extracts from its conversations, one conversation message, and its key."""
    result = _manage(mcp_env.env, mcp_env.tmp, "shell", "--no-imports", "-c", PROVISION)
    assert result.returncode == 0, result.stderr[-2000:]
    return next(line for line in result.stdout.splitlines() if line.startswith("KEY="))[4:]


@pytest.fixture
def scripted_llm() -> Iterator[LLMScript]:
    script = LLMScript([])
    with llm_server(script):
        yield script


@pytest.fixture
def elsewhere(tmp_path: Path) -> Path:
    """The working directory of an MCP client or of a shell: not the checkout."""
    directory = tmp_path / "elsewhere"
    directory.mkdir()
    return directory


def _settings_file(path: Path, script: LLMScript | None) -> Path:
    """A settings file as the README's recipe writes it: the LLM's lines (none for ``None``)."""
    lines = ["# memoryplatform"]
    if script is not None:
        lines += ["LLM_PROVIDER=anthropic", f"LLM_URL={script.url}", "LLM_MODEL=test-model"]
        lines += [f"LLM_PRICES={json.dumps(PRICES)}"]
    path.write_text("\n".join(lines) + "\n")
    return path


def _environment(mcp_env: McpEnv, env_file: Path, **extra: str) -> dict[str, str]:
    """The harness's environment (its database) without any LLM setting, reading ``env_file``."""
    env = {k: v for k, v in mcp_env.env.items() if not k.startswith("LLM_")}
    return env | {"ENV_FILE": str(env_file)} | extra


def _manage(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 (our own interpreter, fixed arguments)
        [PYTHON, MANAGE, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False
    )


@asynccontextmanager
async def _mcp_client(env: dict[str, str], cwd: Path, errlog: Path) -> AsyncIterator[Client]:
    """``manage.py mcp`` started as ``memoryplatform-client mcp-config`` writes it: the interpreter and
    manage.py by absolute path, the key its only setting, from the client's own directory."""
    params = StdioServerParameters(command=PYTHON, args=[MANAGE, "mcp"], cwd=str(cwd), env=env)
    with errlog.open("a") as log:
        async with Client(stdio_client(params, errlog=log)) as client:
            yield client


def test_the_stdio_mcp_server_extracts_with_the_llm_of_the_settings_file(
    mcp_env: McpEnv, agent_key: str, scripted_llm: LLMScript, elsewhere: Path, tmp_path: Path
):
    scripted_llm.answers = [facts(fact("home_city", "Lisbon"))]
    env = _environment(mcp_env, _settings_file(tmp_path / "llm.env", scripted_llm))
    env["MEMORYPLATFORM_API_KEY"] = agent_key
    messages = [{"role": "user", "content": "I live in Lisbon."}]

    async def main() -> None:
        async with _mcp_client(env, elsewhere, tmp_path / "stdio.log") as client:
            answer = await ok(client, "extract_memories", userId="lisbon-user", messages=messages)
            assert [o["op"] for o in answer["operations"]] == ["ADD"], answer
            entry = await ok(client, "get_memory_by_key", userId="lisbon-user", key="home_city")
            assert (entry["value"], entry["source"]) == ("Lisbon", "extracted")

    run(main)
    assert [r["path"] for r in scripted_llm.requests] == ["/v1/messages"]
    assert scripted_llm.requests[0]["model"] == "test-model"


def test_extract_conversations_uses_the_llm_of_the_settings_file(
    mcp_env: McpEnv, agent_key: str, scripted_llm: LLMScript, elsewhere: Path, tmp_path: Path
):
    command = ("extract_conversations", "--agent", AGENT)
    without = _environment(mcp_env, _settings_file(tmp_path / "none.env", None))
    result = _manage(without, elsewhere, *command)  # the same command, the file without the LLM's lines
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(result.stdout) == {"skipped": "LLM_PROVIDER is empty"}

    scripted_llm.answers = [facts(fact("home_city", "Porto", sources=[0]))]
    result = _manage(
        _environment(mcp_env, _settings_file(tmp_path / "llm.env", scripted_llm)), elsewhere, *command
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(result.stdout)["agents"][AGENT]["added"] == 1, result.stdout
    assert "I live in Porto." in scripted_llm.requests[0]["messages"][-1]["content"]
