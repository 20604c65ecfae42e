"""Tasks through their doors: the lifecycle, who may do what, the memory stored on completion (in the same
transaction), the LLM tools and the admin."""

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from activity.models import Task
from tests.factories import AgentFactory
from tests.helpers import assert_envelope, internal_id, public_id
from usermemory.models import AgentMemoryPolicy, MemoryEntry

URL = "/v1/tasks"
U = "user-tasks"
MEMORIES = "/usermemorystore/memories"


def create(client, **body):
    response = client.post(URL, body, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def patch(client, task, **body):
    return client.patch(f"{URL}/{task['id']}", body, format="json")


def memory_of(client, key):
    return client.get(f"{MEMORIES}/{U}/key/{key}")


def test_the_lifecycle_ends_with_the_result_as_the_assignees_memory(agent_a_api, agent_b_api):
    task = create(
        agent_a_api, title="Find a flight", assigneeId="agent-b", userId=U, context={"to": "Lisbon"}
    )
    assert task == {
        **task,
        "creatorId": "agent-a",
        "assigneeId": "agent-b",
        "userId": U,
        "context": {"to": "Lisbon"},
        "status": "pending",
        "result": None,
        "visibility": "self",
        "memoryEntryId": None,
        "finishedAt": None,
    }
    assert [t["id"] for t in agent_b_api.get(URL, {"assigneeId": "agent-b"}).json()["results"]] == [
        task["id"]
    ]

    assert patch(agent_b_api, task, status="in_progress").json()["status"] == "in_progress"
    response = patch(agent_b_api, task, status="done", result={"flight": "TP123"})

    assert response.status_code == 200, response.content
    done = response.json()
    assert done["status"] == "done" and done["result"] == {"flight": "TP123"} and done["finishedAt"]
    memory = memory_of(agent_b_api, f"task:{task['id']}").json()
    assert memory["id"] == done["memoryEntryId"]
    assert memory["category"] == "task_result" and memory["visibility"] == "self"
    assert memory["sourceAgentId"] == "agent-b"
    assert memory["value"] == {"title": "Find a flight", "result": {"flight": "TP123"}}
    assert_envelope(memory_of(agent_a_api, f"task:{task['id']}"), 404, "not_found")  # self of agent-b
    # Final is final.
    assert_envelope(patch(agent_b_api, task, status="pending"), 409, "conflict")


def test_a_global_task_result_is_seen_by_every_agent(agent_a_api, agent_b_api):
    task = create(agent_a_api, title="Ask the size", assigneeId="agent-b", userId=U, visibility="global")
    assert patch(agent_b_api, task, status="done", result="size M").status_code == 200

    assert memory_of(agent_a_api, f"task:{task['id']}").json()["value"]["result"] == "size M"


def test_a_task_without_a_user_stores_no_memory_and_defaults_to_its_creator(agent_a_api):
    task = create(agent_a_api, title="Tidy up")
    assert task["assigneeId"] == "agent-a" and task["userId"] is None

    done = patch(agent_a_api, task, status="done", result="ok").json()
    assert done["memoryEntryId"] is None and not MemoryEntry.objects.exists()


def test_only_the_assignee_completes_and_the_creator_cancels(
    agent_a_api, agent_b_api, make_api_client, viewer_api
):
    outsider = make_api_client("agent", AgentFactory(id="agent-c"))
    task = create(agent_a_api, title="Call back", assigneeId="agent-b", userId=U)

    body = assert_envelope(patch(agent_a_api, task, status="done", result="x"), 403, "forbidden")
    assert body["details"] == {"assigneeId": "agent-b"}
    assert_envelope(patch(agent_a_api, task, result="x"), 403, "forbidden")
    assert_envelope(patch(outsider, task, status="cancelled"), 404, "not_found")
    assert_envelope(outsider.get(f"{URL}/{task['id']}"), 404, "not_found")
    assert outsider.get(URL).json()["results"] == []
    assert_envelope(patch(viewer_api, task, status="cancelled"), 403, "forbidden")
    assert Task.objects.get().status == "pending"

    cancelled = patch(agent_a_api, task, status="cancelled")
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    assert_envelope(patch(agent_b_api, task, status="done", result="late"), 409, "conflict")
    assert not MemoryEntry.objects.exists()


def test_lists_filter_by_assignee_creator_and_status(agent_a_api, agent_b_api, viewer_api, admin_api):
    mine = create(agent_a_api, title="mine")
    for_b = create(agent_a_api, title="for b", assigneeId="agent-b")
    from_b = create(agent_b_api, title="from b", assigneeId="agent-a")
    patch(agent_a_api, mine, status="in_progress")

    def titles(client, **params):
        response = client.get(URL, params)
        assert response.status_code == 200, response.content
        return [t["title"] for t in response.json()["results"]]

    assert titles(agent_a_api) == ["from b", "for b", "mine"]
    assert titles(agent_a_api, assigneeId="agent-a") == ["from b", "mine"]
    assert titles(agent_a_api, creatorId="agent-a") == ["for b", "mine"]
    assert titles(agent_a_api, status="in_progress") == ["mine"]
    assert titles(agent_b_api) == ["from b", "for b"]
    assert titles(viewer_api, assigneeId="agent-b") == ["for b"]
    assert titles(admin_api) == ["from b", "for b", "mine"]
    assert for_b["id"] != from_b["id"]


def test_a_refused_memory_refuses_the_completion_and_writes_nothing(agent_b, agent_a_api, agent_b_api):
    AgentMemoryPolicy.objects.create(agent=agent_b, max_value_length=20)
    task = create(agent_a_api, title="Summarise", assigneeId="agent-b", userId=U)

    body = assert_envelope(
        patch(agent_b_api, task, status="done", result="a long summary" * 5), 400, "bad_request"
    )
    assert body["details"]["limit"] == "maxValueLength"
    stored = Task.objects.get()
    assert stored.status == "pending" and stored.result is None and stored.memory_entry_id is None
    assert not MemoryEntry.objects.exists()


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"title": ""},
        {"title": "   "},
        {"title": 5},
        {"title": "t", "assigneeId": "nobody"},
        {"title": "t", "visibility": "everyone"},
        {"title": "t" * 501},
        {"title": "t", "groupIds": "team"},
    ],
)
def test_bad_tasks_are_a_400_and_write_nothing(agent_a_api, body):
    assert_envelope(agent_a_api.post(URL, body, format="json"), 400, "bad_request")
    assert not Task.objects.exists()


def test_bad_changes_are_4xx(agent_a_api, viewer_api, admin_api, settings):
    task = create(agent_a_api, title="t")
    assert_envelope(patch(agent_a_api, task, status="finished"), 400, "bad_request")
    settings.ACTIVITY_MAX_CHARS = 10
    assert_envelope(patch(agent_a_api, task, result="x" * 20), 400, "bad_request")
    assert_envelope(agent_a_api.patch(f"{URL}/١", {"status": "done"}, format="json"), 404, "not_found")
    assert_envelope(agent_a_api.patch(f"{URL}/999999", {"status": "done"}, format="json"), 404, "not_found")
    assert_envelope(viewer_api.post(URL, {"title": "t"}, format="json"), 403, "forbidden")
    assert_envelope(admin_api.post(URL, {"title": "t"}, format="json"), 403, "forbidden")
    assert Task.objects.get().status == "pending"


# --- LLM tools ------------------------------------------------------------------------------------------


def invoke(client, name, **arguments):
    response = client.post(f"/v1/tools/{name}/invoke", {"userId": U, "arguments": arguments}, format="json")
    assert response.status_code == 200, response.content
    return response.json()["result"]


def test_the_llm_task_tools(agent_a_api, agent_b_api):
    created = invoke(agent_a_api, "createTask", title="Book a table", assigneeId="agent-b")
    task = Task.objects.get()
    tid = public_id(task.pk, "task")  # the tools show the public id
    assert created == f"✅ Task created: #{tid} [pending] Book a table (from agent-a, for agent-b)"
    assert task.user_id == U

    assert (
        invoke(agent_b_api, "listMyTasks") == f"  • #{tid} [pending] Book a table (from agent-a, for agent-b)"
    )
    assert invoke(agent_a_api, "listMyTasks") == "No tasks assigned to you."
    refused = invoke(agent_a_api, "completeTask", taskId=tid, result="booked")
    assert refused.startswith("❌ Task not completed: Only the task's assignee")

    done = invoke(agent_b_api, "completeTask", taskId=tid, result="Booked for 8pm")
    assert done == (
        f"✅ Task done: #{tid} [done] Book a table (from agent-a, for agent-b). "
        f"Its result is remembered as 'task:{tid}'."
    )
    assert memory_of(agent_b_api, f"task:{tid}").json()["value"]["result"] == "Booked for 8pm"
    assert invoke(agent_b_api, "listMyTasks") == "No tasks assigned to you."
    assert invoke(agent_b_api, "listMyTasks", status="done").startswith(f"  • #{tid} [done]")
    assert invoke(agent_b_api, "completeTask", taskId="x", result="r").startswith("❌ Invalid arguments")


# --- Admin ----------------------------------------------------------------------------------------------


@pytest.fixture
def staff_client(client, db):
    client.force_login(User.objects.create_superuser("boss", "boss@example.com", "pw-for-tests-only"))
    return client


def test_the_admin_filters_tasks_and_changes_their_status(staff_client, agent_a_api):
    open_task = create(agent_a_api, title="open")
    finished = create(agent_a_api, title="finished")
    patch(agent_a_api, finished, status="done", result="ok")
    changelist = reverse("admin:activity_task_changelist")

    assert staff_client.get(changelist + "?status__exact=pending").context["cl"].result_count == 1
    response = staff_client.post(
        changelist,
        # the admin (staff only) works on the rows' own ids
        {
            "action": "mark_cancelled",
            "_selected_action": [internal_id(t["id"], "task") for t in (open_task, finished)],
        },
        follow=True,
    )

    assert response.status_code == 200
    statuses = dict(Task.objects.values_list("title", "status"))
    assert statuses == {"open": "cancelled", "finished": "done"}  # final is final, in the admin too
    assert "is done: it changes no more" in response.content.decode()


# --- GDPR -----------------------------------------------------------------------------------------------


def test_gdpr_export_and_erasure_cover_tasks_and_tool_calls(agent_a_api, admin_api):
    task = create(agent_a_api, title="Plan a trip", userId=U)
    patch(agent_a_api, task, status="done", result="Lisbon")
    invoke(agent_a_api, "recallMemories")  # a tool call about the user
    other = create(agent_a_api, title="Someone else's", userId="user-other")

    export = admin_api.get(f"{MEMORIES}/{U}/export").json()["activity"]
    assert [t["title"] for t in export["tasks"]] == ["Plan a trip"]
    assert [t["id"] for t in export["tasks"]] == [int(task["id"])]  # the id the API gave, as an integer
    assert [c["tool"] for c in export["toolCalls"]] == ["recallMemories"]
    report = admin_api.delete(f"{MEMORIES}/{U}").json()

    assert report["activity"] == {"tasksDeleted": 1, "toolCallsDeleted": 1}
    assert list(Task.objects.values_list("id", flat=True)) == [internal_id(other["id"], "task")]
    assert not MemoryEntry.objects.filter(user_id=U).exists()


def test_the_task_list_takes_a_fixed_number_of_queries(agent_a_api, django_assert_num_queries):
    for n in range(3):
        create(agent_a_api, title=f"t{n}", assigneeId="agent-a")
    with django_assert_num_queries(3):  # the key, the count, the page
        response = agent_a_api.get(URL, {"limit": 2})
    assert [t["title"] for t in response.json()["results"]] == ["t2", "t1"]
