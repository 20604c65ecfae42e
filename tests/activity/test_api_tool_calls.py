"""The tool-call log through its doors: REST batches and reads per role, our LLM tools logging themselves,
Dream's retention pass, and the read-only admin."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone

from activity.models import ToolCall
from tests.helpers import assert_envelope

URL = "/v1/activity/tool-calls"


def post(client, *calls):
    return client.post(URL, {"calls": list(calls)}, format="json")


def listed(client, **params):
    response = client.get(URL, params)
    assert response.status_code == 200, response.content
    return response.json()


# --- Logging over REST ---------------------------------------------------------------------------------


def test_an_agent_logs_a_batch_and_reads_it_back_newest_first(agent_a_api):
    response = post(
        agent_a_api,
        {"tool": "web_search", "args": {"q": "weather"}, "result": {"hits": 3}, "durationMs": 120},
        {
            "tool": "send_mail",
            "args": {"to": "u@example.com"},
            "result": "SMTP 550",
            "success": False,
            "error": "mailbox unavailable",
            "taskId": "t-1",
            "conversationId": "c-1",
            "sessionId": "s-1",
        },
    )

    assert response.status_code == 201, response.content
    created = response.json()["calls"]
    assert [call["tool"] for call in created] == ["web_search", "send_mail"]
    body = listed(agent_a_api)
    assert body["next"] is None
    mail, search = body["results"]
    assert search["agentId"] == "agent-a" and search["via"] == "rest"
    assert search["args"] == {"q": "weather"} and search["result"] == {"hits": 3}
    assert search["success"] is True and search["durationMs"] == 120 and search["taskId"] is None
    assert mail == {
        **mail,
        "tool": "send_mail",
        "result": "SMTP 550",
        "success": False,
        "error": "mailbox unavailable",
        "taskId": "t-1",
        "conversationId": "c-1",
        "sessionId": "s-1",
        "durationMs": None,
    }
    assert set(mail) == {
        "id",
        "agentId",
        "tool",
        "args",
        "result",
        "success",
        "durationMs",
        "error",
        "taskId",
        "conversationId",
        "sessionId",
        "via",
        "createdAt",
    }


def test_the_agent_is_the_keys_and_another_agent_cannot_read_it(
    agent_a_api, agent_b_api, viewer_api, admin_api
):
    assert post(agent_a_api, {"tool": "a_tool", "agentId": "agent-b"}).status_code == 201  # agentId ignored
    assert post(agent_b_api, {"tool": "b_tool"}).status_code == 201

    assert [c["tool"] for c in listed(agent_b_api)["results"]] == ["b_tool"]
    body = assert_envelope(agent_b_api.get(URL, {"agentId": "agent-a"}), 403, "forbidden")
    assert body["details"] == {"agentId": "agent-a"}
    assert [c["tool"] for c in listed(agent_a_api, agentId="agent-a")["results"]] == ["a_tool"]
    for reader in (viewer_api, admin_api):
        assert [c["tool"] for c in listed(reader, agentId="agent-a")["results"]] == ["a_tool"]
        assert {c["tool"] for c in listed(reader)["results"]} == {"a_tool", "b_tool"}


def test_only_an_agent_key_logs(viewer_api, admin_api, anon_api):
    assert_envelope(post(viewer_api, {"tool": "x"}), 403, "forbidden")
    assert_envelope(post(admin_api, {"tool": "x"}), 403, "forbidden")
    assert_envelope(post(anon_api, {"tool": "x"}), 401, "unauthorized")
    assert_envelope(anon_api.get(URL), 401, "unauthorized")
    assert not ToolCall.objects.exists()


def test_an_unavailable_agent_may_read_its_log_but_not_write_it(agent_a, agent_a_api, admin_api):
    assert post(agent_a_api, {"tool": "before"}).status_code == 201
    assert (
        admin_api.patch(f"/v1/agents/{agent_a.id}", {"status": "unavailable"}, format="json").status_code
        == 200
    )

    assert_envelope(post(agent_a_api, {"tool": "after"}), 403, "forbidden")
    assert [c["tool"] for c in listed(agent_a_api)["results"]] == ["before"]


@pytest.mark.parametrize(
    ("calls", "where"),
    [
        ([], "calls"),
        ([{"tool": f"t{i}"} for i in range(101)], "calls"),
        ([{"tool": "ok"}, {"tool": 5}], "calls"),
        ([{"tool": "ok"}, {"args": {}}], "calls"),
        ([{"tool": "ok"}, {"tool": "t", "durationMs": -1}], "calls"),
        ([{"tool": "ok"}, {"tool": "t", "durationMs": "١"}], "calls"),
        ([{"tool": "ok"}, {"tool": "x" * 129}], "calls"),
        ([{"tool": "ok"}, {"tool": "t", "createdAt": "yesterday"}], "calls"),
    ],
)
def test_bad_batches_are_a_400_and_write_nothing(agent_a_api, calls, where):
    body = assert_envelope(post(agent_a_api, *calls), 400, "bad_request")
    assert where in body["details"]["fields"]
    assert not ToolCall.objects.exists()


def test_a_result_or_args_over_the_limit_is_refused_naming_the_call(agent_a_api, settings):
    settings.ACTIVITY_MAX_CHARS = 100
    fits = {"tool": "ok", "result": "x" * 98}  # 100 characters as JSON, with its quotes
    for field in ("result", "args"):
        body = assert_envelope(post(agent_a_api, fits, {"tool": "big", field: "x" * 99}), 400, "bad_request")
        assert body["details"] == {"index": 1, "field": field, "limit": 100}
    assert not ToolCall.objects.exists()
    assert post(agent_a_api, fits).status_code == 201


def test_a_call_from_the_future_is_refused(agent_a_api):
    later = (timezone.now() + timedelta(hours=1)).isoformat()
    body = assert_envelope(
        post(agent_a_api, {"tool": "ok"}, {"tool": "t", "createdAt": later}), 400, "bad_request"
    )
    assert body["details"] == {"index": 1}
    assert not ToolCall.objects.exists()


# --- Reading: filters and the cursor ------------------------------------------------------------------


def test_filters_by_tool_task_success_and_since(agent_a_api):
    now = timezone.now()
    post(
        agent_a_api,
        {"tool": "search", "taskId": "t-1", "createdAt": (now - timedelta(days=2)).isoformat()},
        {"tool": "search", "success": False, "createdAt": (now - timedelta(hours=1)).isoformat()},
        {"tool": "mail", "taskId": "t-1"},
    )

    def tools(**params):
        return sorted(
            c["tool"] + ("" if c["success"] else "!") for c in listed(agent_a_api, **params)["results"]
        )

    assert tools(tool="search") == ["search", "search!"]
    assert tools(taskId="t-1") == ["mail", "search"]
    assert tools(success="false") == ["search!"]
    assert tools(since=(now - timedelta(days=1)).isoformat()) == ["mail", "search!"]
    assert tools(tool="nothing") == []


def test_the_cursor_pages_through_every_call_once(agent_a_api, django_assert_num_queries):
    same_time = timezone.now().isoformat()  # ties on createdAt are ordered by id
    post(agent_a_api, *({"tool": f"t{i}", "createdAt": same_time} for i in range(5)))

    seen, after = [], None
    while True:
        params = {"limit": 2, **({"after": after} if after else {})}
        with django_assert_num_queries(2):  # the key, the page
            body = listed(agent_a_api, **params)
        seen += [c["tool"] for c in body["results"]]
        after = body["next"]
        if after is None:
            break
    assert seen == ["t4", "t3", "t2", "t1", "t0"]


@pytest.mark.parametrize(
    "params",
    [{"after": "not-a-cursor"}, {"after": "MjAyNnwx"}, {"limit": 0}, {"limit": 501}, {"since": "soon"}],
)
def test_bad_list_parameters_are_a_400(agent_a_api, params):
    assert_envelope(agent_a_api.get(URL, params), 400, "bad_request")


# --- Our LLM tools log themselves ---------------------------------------------------------------------


def invoke(client, name, **arguments):
    body = {"userId": "user-log", "conversationId": "conv-9", "arguments": arguments}
    response = client.post(f"/v1/tools/{name}/invoke", body, format="json")
    assert response.status_code == 200, response.content
    return response.json()["result"]


def test_llm_tool_calls_are_logged_with_duration_and_success(agent_a_api, agent_b_api):
    remembered = invoke(agent_a_api, "rememberFact", key="color", value="blue", category="preference")
    refused = invoke(agent_a_api, "rememberFact", key="color")  # no value: a refusal the LLM reads
    invoke(agent_b_api, "recallMemories")

    logged = listed(agent_a_api)["results"]
    assert [c["tool"] for c in logged] == ["rememberFact", "rememberFact"]
    bad, good = logged
    assert good["via"] == "llm_tool" and good["agentId"] == "agent-a" and good["success"] is True
    assert good["result"] == remembered and good["error"] == "" and good["conversationId"] == "conv-9"
    assert good["args"] == {
        "userId": "user-log",
        "arguments": {"key": "color", "value": "blue", "category": "preference"},
    }
    assert isinstance(good["durationMs"], int) and good["durationMs"] >= 0
    assert bad["success"] is False and bad["result"] == refused and bad["error"] == "value is required."
    assert [c["tool"] for c in listed(agent_b_api)["results"]] == ["recallMemories"]


def test_a_long_llm_tool_result_is_logged_cut_short(agent_a_api, settings):
    invoke(agent_a_api, "rememberFact", key="bio", value="word " * 100, category="fact")
    settings.ACTIVITY_MAX_CHARS = 200
    full = invoke(agent_a_api, "recallMemories")

    result = listed(agent_a_api, tool="recallMemories")["results"][0]["result"]
    assert len(full) > 200 and full.startswith(result[:100])
    assert len(result) + 2 <= 200 and result.endswith("characters as JSON]")


# --- Retention: Dream deletes calls older than each agent's policy says ------------------------------


def test_dream_prunes_each_agents_calls_past_its_retention(agent_a, agent_a_api, agent_b_api, admin_api):
    response = admin_api.patch(
        f"/v1/agents/{agent_a.id}", {"memoryPolicy": {"toolCallRetentionDays": 10}}, format="json"
    )
    assert response.status_code == 200, response.content
    assert response.json()["memoryPolicy"]["toolCallRetentionDays"] == 10
    now = timezone.now()

    def days_ago(days):
        return (now - timedelta(days=days)).isoformat()

    post(agent_a_api, {"tool": "a-15", "createdAt": days_ago(15)}, {"tool": "a-5", "createdAt": days_ago(5)})
    # agent-b has no policy: the default retention, 30 days.
    post(
        agent_b_api, {"tool": "b-40", "createdAt": days_ago(40)}, {"tool": "b-15", "createdAt": days_ago(15)}
    )

    call_command("dream")

    assert set(ToolCall.objects.values_list("tool", flat=True)) == {"a-5", "b-15"}
    # 0 keeps them forever.
    admin_api.patch(f"/v1/agents/{agent_a.id}", {"memoryPolicy": {"toolCallRetentionDays": 0}}, format="json")
    post(agent_a_api, {"tool": "a-400", "createdAt": days_ago(400)})
    call_command("dream")
    assert set(ToolCall.objects.values_list("tool", flat=True)) == {"a-5", "b-15", "a-400"}


# --- Admin: read-only, filtered -----------------------------------------------------------------------


@pytest.fixture
def staff_client(client, db):
    client.force_login(User.objects.create_superuser("boss", "boss@example.com", "pw-for-tests-only"))
    return client


def test_the_admin_lists_calls_read_only_with_filters(staff_client, agent_a_api, agent_b_api):
    post(agent_a_api, {"tool": "search"}, {"tool": "mail", "success": False})
    post(agent_b_api, {"tool": "search"})
    changelist = reverse("admin:activity_toolcall_changelist")

    assert staff_client.get(changelist).context["cl"].result_count == 3
    assert staff_client.get(changelist + "?success__exact=0").context["cl"].result_count == 1
    assert staff_client.get(changelist + "?agent__id__exact=agent-b").context["cl"].result_count == 1
    assert staff_client.get(changelist + "?q=search").context["cl"].result_count == 2
    call = ToolCall.objects.get(tool="mail")
    detail = staff_client.get(reverse("admin:activity_toolcall_change", args=[call.pk]))
    assert detail.status_code == 200 and b'name="_save"' not in detail.content
    assert staff_client.get(reverse("admin:activity_toolcall_add")).status_code == 403


@pytest.mark.parametrize(
    "moment", ["0001-01-01T00:00:00+00:01", "0001-01-01T00:00:00Z", "9999-12-31T23:59:59-00:01"]
)
def test_a_call_at_a_time_no_read_can_show_is_refused(agent_a_api, moment):
    """Before year 1 once in UTC, after year 9999, or on their first and last days (no time zone can show
    them): a 400, nothing recorded, and the log still reads."""
    assert_envelope(post(agent_a_api, {"tool": "ok"}, {"tool": "t", "createdAt": moment}), 400, "bad_request")
    assert not ToolCall.objects.exists()
    assert listed(agent_a_api)["results"] == []
