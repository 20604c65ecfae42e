"""MCP calls over HTTP appear in the request log and in /metrics, per tool, outcome and duration; no
"Terminating session" line follows each; the answer carries an X-Request-Id."""

import urllib.request

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.multiprocess import MultiProcessCollector

from tests.agenttools.mcp_harness import error, ok, run


def _samples(mcp_env, name: str, **labels: str) -> float:
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=str(mcp_env.tmp / "prometheus"))  # what the server's /metrics reads
    return registry.get_sample_value(name, labels) or 0.0


@pytest.mark.parametrize("transport", ["http"])  # the served transport: its log and its /metrics
def test_mcp_calls_are_in_the_request_log_and_the_metrics(connect, http_url, mcp_env):
    ok_before = _samples(mcp_env, "mcp_tool_call_seconds_count", tool="count_user_memories", outcome="ok")
    refused_before = _samples(
        mcp_env, "mcp_tool_call_seconds_count", tool="get_memory_by_key", outcome="refused"
    )

    async def main() -> None:
        async with connect("agent-a") as agent:
            await ok(agent, "count_user_memories", userId="observed")
            await error(agent, "get_memory_by_key", userId="observed", key="missing")

    run(main)
    assert (
        _samples(mcp_env, "mcp_tool_call_seconds_count", tool="count_user_memories", outcome="ok")
        == ok_before + 1
    )
    assert (
        _samples(mcp_env, "mcp_tool_call_seconds_count", tool="get_memory_by_key", outcome="refused")
        == refused_before + 1
    )
    log = (mcp_env.tmp / "serve.log").read_text()
    assert " memoryplatform.requests MCP count_user_memories ok " in log
    assert " memoryplatform.requests MCP get_memory_by_key refused " in log
    assert "caller=agent:agent-a" in log
    assert "Terminating session" not in log


def test_an_mcp_answer_carries_the_request_id(http_url, mcp_env):
    request = urllib.request.Request(f"{http_url}/mcp/", method="GET", headers={"X-Request-Id": "trace-42"})
    try:
        urllib.request.urlopen(request, timeout=30)  # noqa: S310 (the test's own server)
    except urllib.error.HTTPError as refused:  # 405: the MCP app answers POSTs only
        assert refused.code == 405
        assert refused.headers["X-Request-Id"] == "trace-42"
    else:
        raise AssertionError("GET /mcp/ should be refused")
