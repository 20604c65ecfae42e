"""Issue 33 through the LLM tools (``/v1/tools/{name}/invoke``, as tests/agenttools/test_llm_tools.py calls
them): the task tools obey the task service's rules on groups (5) and sizes (6); a logged call stays within
``ACTIVITY_MAX_CHARS`` when cut short."""

import json

from activity.models import Task, ToolCall
from tests.helpers import assert_envelope, public_id

U = "user-llm-task-bounds"
TOOLS = "/v1/tools"


def invoke(client, name, _context=None, **arguments):
    body = {"userId": U, **(_context or {}), "arguments": arguments}
    return client.post(f"{TOOLS}/{name}/invoke", body, format="json")


def text(client, name, _context=None, **arguments):
    response = invoke(client, name, _context, **arguments)
    assert response.status_code == 200, response.content
    return response.json()["result"]


def test_create_task_refuses_an_over_long_context_and_writes_nothing(agent_a_api, agent_b, settings):
    settings.ACTIVITY_MAX_CHARS = 1_000

    refused = text(
        agent_a_api, "createTask", title="Read this", assigneeId="agent-b", context={"x": "y" * 1_000}
    )

    assert refused == "❌ Task not created: context is longer than 1000 characters as JSON."
    assert not Task.objects.exists()
    assert (
        text(agent_a_api, "createTask", title="Read this", assigneeId="agent-b", context={"x": "y"})[0]
        == "✅"
    )


def test_complete_task_refuses_an_over_long_result(agent_a_api, settings):
    settings.ACTIVITY_MAX_CHARS = 1_000
    text(agent_a_api, "createTask", title="Summarise")
    task = Task.objects.get()

    refused = text(agent_a_api, "completeTask", taskId=public_id(task.pk, "task"), result="r" * 1_000)

    assert refused == "❌ Task not completed: result is longer than 1000 characters as JSON."
    task.refresh_from_db()
    assert task.status == "pending" and task.result is None


def test_create_task_names_only_groups_of_its_agent(agent_a, agent_b_api):
    # The tool's context names the groups; agent-b is in none. The tool door refuses it up front (403), and
    # the service would too: the same rule as REST and MCP.
    response = invoke(agent_b_api, "createTask", {"groupIds": ["team"]}, title="t", assigneeId="agent-a")

    body = assert_envelope(response, 403, "forbidden")
    assert body["details"] == {"groups": ["team"]}
    assert not Task.objects.exists()


def test_list_my_tasks_is_bounded_whatever_others_assigned(agent_a_api, agent_b_api, settings):
    settings.ACTIVITY_MAX_CHARS = 1_000
    for n in range(5):
        assert (
            text(agent_a_api, "createTask", title=f"t{n}", assigneeId="agent-b", context={"x": "y" * 5_000})[
                0
            ]
            == "❌"
        )

    assert text(agent_b_api, "listMyTasks") == "No tasks assigned to you."


def test_a_logged_call_cut_short_fits_the_limit_even_when_escaped(agent_a_api, settings):
    settings.ACTIVITY_MAX_CHARS = 200
    text(agent_a_api, "rememberFact", key="quote", value='"' * 500)

    logged = ToolCall.objects.get(tool="rememberFact")

    assert logged.args["userId"] == U  # kept whole, so that erasure still finds the call
    assert logged.args["arguments"].endswith("characters as JSON]")
    assert len(json.dumps(logged.args, separators=(",", ":"), ensure_ascii=False)) <= 200


def test_erasure_removes_a_logged_call_whose_args_were_cut_short(agent_a_api, admin_api, settings):
    settings.ACTIVITY_MAX_CHARS = 200
    text(agent_a_api, "rememberFact", key="quote", value="v" * 500)
    assert ToolCall.objects.filter(tool="rememberFact").exists()

    assert admin_api.delete(f"/usermemorystore/memories/{U}").status_code == 200

    assert not ToolCall.objects.filter(tool="rememberFact").exists()
