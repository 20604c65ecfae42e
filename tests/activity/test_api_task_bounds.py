"""Issue 33 over REST: a task names only groups its creator is in (5), and its context, its result and a page
of tasks are bounded in size (6), old rows included."""

import json

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from activity.models import Task
from tests.helpers import assert_envelope
from usermemory.models import MemoryEntry

URL = "/v1/tasks"
MAX_TASK_PAGE = 100  # the contract (README): activity.selectors.MAX_TASK_PAGE
U = "user-task-bounds"


def create(client, **body):
    return client.post(URL, body, format="json")


# --- 5: groups --------------------------------------------------------------------------------------------


def test_a_task_cannot_name_a_group_its_creator_is_not_in(agent_a, agent_b_api):
    # agent-a is in "team", agent-b is not: a task from agent-b to agent-a would land its result in "team".
    response = create(agent_b_api, title="t", assigneeId="agent-a", userId=U, groupIds=["team", "nowhere"])

    body = assert_envelope(response, 403, "forbidden")
    assert body["details"] == {"groups": ["nowhere", "team"]}
    assert "agent-b" in body["error"]
    assert not Task.objects.exists()


def test_a_member_names_its_group_and_the_result_lands_there(agent_a_api, agent_b_api):
    response = create(agent_a_api, title="t", userId=U, visibility="group", groupIds=["team"])
    assert response.status_code == 201, response.content
    task = response.json()

    done = agent_a_api.patch(f"{URL}/{task['id']}", {"status": "done", "result": "ok"}, format="json")

    assert done.status_code == 200, done.content
    assert MemoryEntry.objects.get(key=f"task:{task['id']}").group_ids == ["team"]


# --- 6: sizes ---------------------------------------------------------------------------------------------


def test_an_over_long_context_is_a_400_naming_the_field_and_writes_nothing(agent_a_api, agent_b, settings):
    settings.ACTIVITY_MAX_CHARS = 100
    fits = {"note": "x" * 89}  # 100 characters as compact JSON
    assert len(json.dumps(fits, separators=(",", ":"))) == 100
    assert create(agent_a_api, title="fits", assigneeId="agent-b", context=fits).status_code == 201

    response = create(agent_a_api, title="big", assigneeId="agent-b", context={"note": "x" * 90})

    body = assert_envelope(response, 400, "bad_request")
    assert body["details"] == {"field": "context", "limit": 100}
    assert "context is longer than 100 characters" in body["error"]
    assert list(Task.objects.values_list("title", flat=True)) == ["fits"]


def test_an_over_long_result_is_a_400_naming_the_field(agent_a_api, settings):
    settings.ACTIVITY_MAX_CHARS = 100
    task = create(agent_a_api, title="t").json()

    response = agent_a_api.patch(
        f"{URL}/{task['id']}", {"status": "done", "result": "r" * 200}, format="json"
    )

    body = assert_envelope(response, 400, "bad_request")
    assert body["details"] == {"field": "result", "limit": 100}
    assert Task.objects.get().status == "pending"


def test_a_task_page_is_at_most_the_bound(agent_a_api, agent_b_api):
    Task.objects.bulk_create(
        Task(
            creator_id="agent-a",
            assignee_id="agent-b",
            title=f"t{n}",
            created_at=timezone.now(),
            updated_at=timezone.now(),
        )
        for n in range(MAX_TASK_PAGE + 1)
    )

    assert len(agent_b_api.get(URL).json()["results"]) == 50
    page = agent_b_api.get(URL, {"limit": MAX_TASK_PAGE}).json()
    assert len(page["results"]) == MAX_TASK_PAGE and page["count"] == MAX_TASK_PAGE + 1 and page["next"]
    body = assert_envelope(agent_b_api.get(URL, {"limit": MAX_TASK_PAGE + 1}), 400, "bad_request")
    assert "limit" in body["details"]["fields"]


def test_the_schema_states_the_page_bound(agent_a_api):
    schema = agent_a_api.get("/api/schema/", {"format": "json"}).json()
    parameters = {p["name"]: p for p in schema["paths"][URL]["get"]["parameters"]}

    assert parameters["limit"]["schema"]["maximum"] == MAX_TASK_PAGE
    create_body = schema["components"]["schemas"]["TaskCreateInputRequest"]["properties"]
    assert "ACTIVITY_MAX_CHARS" in create_body["context"]["description"]
    assert "must be in each" in create_body["groupIds"]["description"]


# --- 6: rows stored before the limit ----------------------------------------------------------------------

BEFORE = [("activity", "0002_tasks")]
AFTER = [("activity", "0003_tasks_cut_long_context_and_result")]


@pytest.fixture
def _back_to_the_latest_schema():
    yield
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("_back_to_the_latest_schema")
def test_rows_stored_before_the_limit_are_cut_short_and_read_bounded(agent_a, agent_b, agent_b_api, settings):
    settings.ACTIVITY_MAX_CHARS = 1_000
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    now = timezone.now()
    common = {"creator_id": "agent-a", "assignee_id": "agent-b", "created_at": now, "updated_at": now}
    big = Task.objects.create(title="big", context={"blob": "é" * 900_000}, result=["r" * 5_000], **common)
    small = Task.objects.create(title="small", context={"to": "Lisbon"}, result=None, **common)

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(AFTER)
    # Every app's later migrations before the read: the key lookup reads the whole memory policy, whose newer
    # columns went back with activity's (usermemory's 0027 depends on activity's 0005). None touches tasks.
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())

    response = agent_b_api.get(URL)
    assert response.status_code == 200
    assert len(response.content) < 5_000
    tasks = {t["title"]: t for t in response.json()["results"]}
    assert tasks["small"]["context"] == {"to": "Lisbon"} and tasks["small"]["result"] is None
    context, result = tasks["big"]["context"], tasks["big"]["result"]
    assert context.startswith('{"blob": "éé') and context.endswith("… [cut: 900011 characters as JSON]")
    assert result.startswith('["rrr') and result.endswith("… [cut: 5004 characters as JSON]")
    for value in (context, result):
        assert 990 < len(json.dumps(value, ensure_ascii=False)) <= 1_000
    assert {big.pk, small.pk} == set(Task.objects.values_list("pk", flat=True))
