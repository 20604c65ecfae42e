"""Public ids (issue 33, finding 8): the ids of entries, tasks, tool calls and history events count nothing.

Through the doors: an agent that writes twice, with another agent's writes in between, cannot read the count
from its ids (they decode only with the key); every door's id round-trips; legacy (row) ids are refused by
default (issue 44, finding 10) and work, under the same visibility rules, only where a deployment sets
``PUBLIC_IDS_ACCEPT_LEGACY`` explicitly; malformed or out-of-range ids are 404s.
"""

import base64
import random

import pytest
from django.conf import settings
from django.core.checks import run_checks
from django.test import override_settings

from activity.models import Task, ToolCall
from memoryplatform import publicids
from tests.helpers import assert_envelope, internal_id
from usermemory.models import MemoryEntry

MEMORIES = "/usermemorystore/memories"
TASKS = "/v1/tasks"
CALLS = "/v1/activity/tool-calls"
U = "user-ids"
BASE, TOP = publicids.PUBLIC_BASE, 2 * publicids.PUBLIC_BASE


def put(client, key, user=U, turn=None):
    body = {"userId": user, "key": key, "value": key}
    response = client.put(MEMORIES, body, format="json", headers={"X-Turn-Id": turn or key})
    assert response.status_code == 201, response.content
    return response.json()


def create_task(client, **body):
    response = client.post(TASKS, {"title": "t", **body}, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def log_calls(client, n):
    response = client.post(CALLS, {"calls": [{"tool": f"t{i}"} for i in range(n)]}, format="json")
    assert response.status_code == 201, response.content
    return [call["id"] for call in response.json()["calls"]]


# --- The permutation ----------------------------------------------------------------------------------------


def test_the_permutation_is_one_to_one_within_its_range_and_differs_per_kind():
    samples = [0, 1, 2, BASE - 1, *random.Random(8).sample(range(BASE), 2000)]
    for kind in (publicids.ENTRY, publicids.TASK, publicids.TOOL_CALL, publicids.EVENT, publicids.EXTRACTION):
        public = [publicids.to_public(kind, n) for n in samples]
        assert all(BASE <= p < TOP for p in public)  # a JavaScript number holds it exactly
        assert len(set(public)) == len(samples)
        assert [publicids.to_internal(kind, p) for p in public] == samples
    assert publicids.to_public(publicids.ENTRY, 7) != publicids.to_public(publicids.TASK, 7)


@override_settings(PUBLIC_ID_KEY="")  # unset, whatever the .env says: derived from SECRET_KEY
def test_ids_decode_only_with_the_key():
    public = [publicids.to_public(publicids.ENTRY, n) for n in range(100, 110)]
    with override_settings(PUBLIC_ID_KEY="another key"):
        assert [publicids.to_internal(publicids.ENTRY, p) for p in public] != list(range(100, 110))
        assert publicids.to_public(publicids.ENTRY, 100) != public[0]
    with override_settings(SECRET_KEY="another secret"):
        assert publicids.to_public(publicids.ENTRY, 100) != public[0]


@pytest.mark.parametrize("given", [-1, TOP, 2**60, True, "", "12a", "١٢", " 5", "9" * 17, None, 1.5])
def test_anything_but_a_whole_number_in_range_is_no_id(given):
    assert publicids.parse(publicids.ENTRY, given) is None


def test_legacy_ids_are_taken_as_row_ids_only_when_turned_on():
    assert publicids.parse(publicids.TASK, "42") is None  # the default
    assert publicids.parse(publicids.TASK, str(publicids.to_public(publicids.TASK, 42))) == 42
    with override_settings(PUBLIC_IDS_ACCEPT_LEGACY=True):
        assert publicids.parse(publicids.TASK, "42") == 42


def test_the_default_refuses_legacy_ids_and_a_deploy_check_warns_when_they_are_on():
    """Issue 44, finding 10 (a): new deployments refuse legacy ids; one that keeps them is warned."""
    assert settings.PUBLIC_IDS_ACCEPT_LEGACY is False  # no .env nor environment sets it for the tests

    def warned() -> bool:
        return any(m.id == "memoryplatform.W004" for m in run_checks(include_deployment_checks=True))

    assert not warned()
    with override_settings(PUBLIC_IDS_ACCEPT_LEGACY=True):
        assert warned()


def test_a_deploy_check_warns_while_the_key_is_derived_from_secret_key():
    def warned() -> bool:
        return any(m.id == "memoryplatform.W002" for m in run_checks(include_deployment_checks=True))

    with override_settings(PUBLIC_ID_KEY="", DEBUG=False):
        assert warned()
    with override_settings(PUBLIC_ID_KEY="pinned", DEBUG=False):
        assert not warned()


# --- No count through the doors -----------------------------------------------------------------------------


def test_an_agent_cannot_count_others_writes_from_its_entry_ids(agent_a_api, agent_b_api):
    first = put(agent_a_api, "first")["id"]
    for i in range(50):
        put(agent_b_api, f"b{i}", user=f"other-{i % 5}", turn=f"b{i}")
    second = put(agent_a_api, "second")["id"]

    assert all(BASE <= int(i) < TOP for i in (first, second))
    assert abs(int(second) - int(first)) != 51
    rows = internal_id(first), internal_id(second)
    assert rows[1] - rows[0] == 51  # the count is there, for the key's holder only
    with override_settings(PUBLIC_ID_KEY="a guessed key"):
        guessed = [publicids.to_internal(publicids.ENTRY, int(i)) for i in (first, second)]
        assert guessed[1] - guessed[0] != 51 and guessed[1] != rows[1]
    # Twenty writes in a row are not in order either (the chance that they are is 1 in 20!).
    ids = [int(put(agent_a_api, f"k{i}", turn=f"k{i}")["id"]) for i in range(20)]
    assert ids != sorted(ids) and ids != sorted(ids, reverse=True)


def test_task_and_tool_call_ids_count_nothing(agent_a_api, agent_b_api):
    first = create_task(agent_a_api)["id"]
    for _ in range(10):
        create_task(agent_b_api)
    second = create_task(agent_a_api)["id"]
    assert BASE <= int(first) < TOP and abs(int(second) - int(first)) != 11
    assert internal_id(second, "task") - internal_id(first, "task") == 11

    (call_1,) = log_calls(agent_a_api, 1)
    log_calls(agent_b_api, 50)
    (call_2,) = log_calls(agent_a_api, 1)
    assert BASE <= int(call_1) < TOP and abs(int(call_2) - int(call_1)) != 51
    assert internal_id(call_2, "tool_call") - internal_id(call_1, "tool_call") == 51


def test_the_tool_call_cursor_holds_no_row_id(agent_a_api):
    ids = log_calls(agent_a_api, 5)
    seen, after, cursors = [], None, []
    while True:
        page = agent_a_api.get(CALLS, {"limit": 2, **({"after": after} if after else {})}).json()
        seen += [call["id"] for call in page["results"]]
        if page["next"] is None:
            break
        after = page["next"]
        cursors.append(base64.urlsafe_b64decode(after).decode())
    assert sorted(seen) == sorted(ids)
    rows = {str(pk) for pk in ToolCall.objects.values_list("pk", flat=True)}
    assert cursors and all(c.partition("|")[2] in ids and c.partition("|")[2] not in rows for c in cursors)


# --- Round trips through each door --------------------------------------------------------------------------


def test_rest_entry_ids_round_trip_and_name_each_other(agent_a_api, admin_api):
    entry = put(agent_a_api, "city")
    assert agent_a_api.get(f"{MEMORIES}/{U}/key/city").json()["id"] == entry["id"]
    history = agent_a_api.get(f"{MEMORIES}/entry/{entry['id']}/history").json()
    assert [e["entryId"] for e in history] == [entry["id"]]
    assert BASE <= int(history[0]["id"]) < TOP  # events' ids are public too
    export = admin_api.get(f"{MEMORIES}/{U}/export").json()
    assert [m["id"] for m in export["memories"]] == [int(entry["id"])]
    assert [e["entryId"] for e in export["history"]] == [int(entry["id"])]
    assert [e["id"] for e in export["history"]] == [int(history[0]["id"])]

    assert agent_a_api.delete(f"{MEMORIES}/entry/{entry['id']}").status_code == 204
    assert_envelope(agent_a_api.delete(f"{MEMORIES}/entry/{entry['id']}"), 404, "not_found")


def test_rest_task_ids_round_trip(agent_a_api, agent_b_api):
    task = create_task(agent_a_api, assigneeId="agent-b", userId=U)
    assert agent_b_api.get(f"{TASKS}/{task['id']}").json()["id"] == task["id"]
    assert [t["id"] for t in agent_b_api.get(TASKS).json()["results"]] == [task["id"]]
    done = agent_b_api.patch(f"{TASKS}/{task['id']}", {"status": "done", "result": "r"}, format="json").json()
    memory = agent_b_api.get(f"{MEMORIES}/{U}/key/task:{task['id']}").json()
    assert done["memoryEntryId"] == memory["id"] and BASE <= int(memory["id"]) < TOP
    assert agent_b_api.get(f"{MEMORIES}/entry/{done['memoryEntryId']}/history").status_code == 200
    conflict = agent_b_api.patch(f"{TASKS}/{task['id']}", {"status": "failed"}, format="json")
    assert task["id"] in assert_envelope(conflict, 409, "conflict")["error"]  # it names the public id


def test_superseded_by_shows_the_public_id(agent_a_api):
    old, summary = put(agent_a_api, "old"), put(agent_a_api, "summary")
    MemoryEntry.objects.filter(id=internal_id(old["id"])).update(superseded_by_id=internal_id(summary["id"]))
    listed = agent_a_api.get(f"{MEMORIES}/{U}", {"includeSuperseded": "true"}).json()
    assert {e["key"]: e["supersededBy"] for e in listed} == {"old": summary["id"], "summary": None}


def test_llm_task_tools_take_and_give_public_ids(agent_a_api, agent_b_api):
    def invoke(client, name, **arguments):
        body = {"userId": U, "arguments": arguments}
        return client.post(f"/v1/tools/{name}/invoke", body, format="json").json()["result"]

    created = invoke(agent_a_api, "createTask", title="Call back", assigneeId="agent-b")
    task_id = created.split("#", 1)[1].split(" ", 1)[0]
    assert BASE <= int(task_id) < TOP and internal_id(task_id, "task") == Task.objects.get().pk
    done = invoke(agent_b_api, "completeTask", taskId=task_id, result="called")
    assert done.startswith(f"✅ Task done: #{task_id} ") and f"'task:{task_id}'" in done
    assert agent_b_api.get(f"{TASKS}/{task_id}").json()["status"] == "done"


# --- Legacy ids and bad ids ---------------------------------------------------------------------------------


def test_legacy_row_ids_are_refused_by_default(agent_a_api, agent_b_api):
    """Issue 44, finding 10 (a): an agent that found its own entry's row number can no longer read its
    history by it, nor probe the numbers next to it (another agent's entry written in between)."""
    mine = put(agent_a_api, "mine")
    theirs = put(agent_b_api, "theirs")
    row = internal_id(mine["id"])
    assert internal_id(theirs["id"]) == row + 1
    for probe in (row, row + 1):
        assert_envelope(agent_a_api.get(f"{MEMORIES}/entry/{probe}/history"), 404, "not_found")
        assert_envelope(agent_a_api.delete(f"{MEMORIES}/entry/{probe}"), 404, "not_found")
    assert agent_a_api.get(f"{MEMORIES}/entry/{mine['id']}/history").status_code == 200
    assert MemoryEntry.objects.filter(id__in=[row, row + 1]).count() == 2


@override_settings(PUBLIC_IDS_ACCEPT_LEGACY=True)  # an existing deployment that keeps them, explicitly
def test_legacy_row_ids_still_work_under_the_same_rules_where_turned_on(agent_a_api, agent_b_api):
    entry, task = put(agent_a_api, "legacy"), create_task(agent_a_api)
    entry_row, task_row = internal_id(entry["id"]), internal_id(task["id"], "task")
    (call,) = log_calls(agent_a_api, 1)
    assert agent_a_api.get(f"{TASKS}/{task_row}").json()["id"] == task["id"]  # answered in the public form
    assert_envelope(agent_b_api.get(f"{TASKS}/{task_row}"), 404, "not_found")  # hidden: same 404 as unknown
    assert_envelope(agent_b_api.delete(f"{MEMORIES}/entry/{entry_row}"), 404, "not_found")
    assert agent_a_api.get(f"{MEMORIES}/entry/{entry_row}/history").status_code == 200
    # A cursor given before public ids (time and row id) still pages.
    row = ToolCall.objects.get(pk=internal_id(call, "tool_call"))
    legacy_cursor = base64.urlsafe_b64encode(f"{row.created_at.isoformat()}|{row.pk + 1}".encode()).decode()
    assert [c["id"] for c in agent_a_api.get(CALLS, {"after": legacy_cursor}).json()["results"]] == [call]
    with override_settings(PUBLIC_IDS_ACCEPT_LEGACY=False):
        assert_envelope(agent_a_api.get(f"{TASKS}/{task_row}"), 404, "not_found")
        assert_envelope(agent_a_api.get(CALLS, {"after": legacy_cursor}), 400, "bad_request")
    assert agent_a_api.delete(f"{MEMORIES}/entry/{entry_row}").status_code == 204


@pytest.mark.parametrize("bad", ["-1", str(2**60), str(TOP), "1e3", "%EF%BC%91"])
def test_an_id_out_of_range_or_malformed_is_a_404(agent_a_api, bad):
    assert_envelope(agent_a_api.get(f"{TASKS}/{bad}"), 404, "not_found")
    assert_envelope(agent_a_api.delete(f"{MEMORIES}/entry/{bad}"), 404, "not_found")
    assert_envelope(agent_a_api.get(f"{MEMORIES}/entry/{bad}/history"), 404, "not_found")


def test_a_public_id_of_another_kind_or_a_hidden_row_answers_as_an_unknown_one(agent_a_api, agent_b_api):
    task = create_task(agent_a_api)
    unknown = agent_b_api.get(f"{TASKS}/{publicids.to_public(publicids.TASK, 10**9)}")
    hidden = agent_b_api.get(f"{TASKS}/{task['id']}")
    assert_envelope(unknown, 404, "not_found") and assert_envelope(hidden, 404, "not_found")
    assert set(unknown.json()) == set(hidden.json())
    entry = put(agent_a_api, "kinds")
    as_task = publicids.to_public(publicids.TASK, internal_id(entry["id"]))
    assert_envelope(agent_a_api.delete(f"{MEMORIES}/entry/{as_task}"), 404, "not_found")
