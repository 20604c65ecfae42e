"""Issue 33 through MCP (stdio and streamable HTTP, tests/agenttools/mcp_harness.py): ``create_task`` names
only groups of its agent (5), and a task's context and result are bounded, so ``list_my_tasks`` is too (6).
The harness's agents: agent-a in group ``team``, agent-b in none; ACTIVITY_MAX_CHARS is the default 16,384."""

import json

from tests.agenttools.mcp_harness import error, ok, run, sessions

LIMIT = 16_384


def test_mcp_create_task_refuses_a_group_its_agent_is_not_in(connect, transport):
    async def main() -> None:
        async with sessions(connect, "agent-a", "agent-b") as (agent_a, agent_b):
            title = f"{transport}: into team"
            refused = await error(
                agent_b, "create_task", title=title, assigneeId="agent-a", groupIds=["team"]
            )
            assert "not a member of group(s): team" in refused
            assert title not in [t["title"] for t in await ok(agent_a, "list_my_tasks")]
            task = await ok(agent_a, "create_task", title=f"{transport}: in team", groupIds="team")
            assert task["groupIds"] == ["team"]

    run(main)


def test_mcp_task_context_and_result_are_bounded_and_so_is_the_list(connect, transport):
    async def main() -> None:
        async with sessions(connect, "agent-a", "agent-b") as (agent_a, agent_b):
            for n in range(3):
                refused = await error(
                    agent_a,
                    "create_task",
                    title=f"{transport}: big {n}",
                    assigneeId="agent-b",
                    context={"blob": "x" * 900_000},
                )
                assert f"context is longer than {LIMIT} characters as JSON" in refused
            task = await ok(agent_a, "create_task", title=f"{transport}: small", assigneeId="agent-b")
            refused = await error(agent_b, "complete_task", taskId=task["id"], result="r" * LIMIT)
            assert f"result is longer than {LIMIT} characters as JSON" in refused
            refused = await error(agent_b, "list_my_tasks", limit=101)
            assert "maximum 100" in refused
            listed = await ok(agent_b, "list_my_tasks", limit=100)
            assert f"{transport}: small" in [t["title"] for t in listed]
            assert not any("big" in t["title"] for t in listed)
            assert len(json.dumps(listed)) < 100_000

    run(main)
