"""Dream's summaries (issue 20) through the doors: entries written over REST, the cycle run by
`manage.py dream` against a real HTTP server speaking chat completions with scripted answers and usage, the
results read back over REST (recall, list, history, GDPR erasure), the run's record and the metrics."""

from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.core.management import call_command
from django.test import override_settings
from django.urls import reverse
from prometheus_client import REGISTRY

from dream.models import DreamRun
from tests.dream.test_commands import run_dream
from tests.helpers import internal_id
from tests.llm_server import Answer
from usermemory.models import MemoryEntry

BASE = "/usermemorystore/memories"
U = "traveller"


def metric(name: str) -> float:
    return REGISTRY.get_sample_value(name) or 0.0


def write(client: Any, facts: list[tuple[str, str, str]]) -> list[str]:
    ids = []
    for key, value, category in facts:  # one turn each: the guardrail allows 10 writes a turn
        body = {"userId": U, "key": key, "value": value, "category": category}
        response = client.put(BASE, body, format="json", headers={"X-Turn-Id": f"{key}-turn"})
        assert response.status_code == 201, response.content
        ids.append(response.json()["id"])
    call_command("embed", "--drain")  # summaries group entries by their vectors
    return ids


# Twelve notes of one trip under numbered keys: related by meaning (a summary takes only related entries
# under opaque or numbered keys, issue 56), so the model is sent all of them.
TRIP = [(f"trip/{n}", f"the Lisbon trip in May, note {n}", "context") for n in range(1, 13)]


def summaries_of(ids: list[str]) -> dict[str, Any]:
    ints = [internal_id(i) for i in ids]  # Dream's model sees the rows' own ids
    return {
        "summaries": [
            {
                "key": "trip.plan",
                "value": "Lisbon in May with her sister, Hotel Avenida, TP 1234",
                "sources": ints[:4],
            },
            {"key": "trip.money", "value": "Budget 2000 EUR, insured, trams not taxis", "sources": ints[4:8]},
            {
                "key": "trip.days",
                "value": "Pastel de nata, Gulbenkian, rain worries, back 14th",
                "sources": ints[8:],
            },
        ]
    }


def test_twelve_related_entries_become_three_summaries_and_nothing_is_lost(
    llm, agent_a, agent_a_api, admin_api, dream_policy, django_capture_on_commit_callbacks
):
    ids = write(agent_a_api, TRIP)
    dream_policy(agent_a, prune_stale_after_days=0, summarize_interactions=True, summarize_min_entries=10)
    llm.answers = [Answer(summaries_of(ids), input_tokens=1000, output_tokens=200)]
    summarized, cost = metric("dream_entries_summarized_total"), metric("dream_llm_cost_dollars_total")

    with django_capture_on_commit_callbacks(execute=True):
        out, _ = run_dream("--no-progress")

    run = DreamRun.objects.get()
    assert (run.status, run.entries_summarized, run.summaries_written) == ("succeeded", 12, 3), (
        out,
        run.details,
    )
    assert float(run.llm_cost) == pytest.approx(0.12)
    assert "entries summarized: 12 into 3 summaries" in out and "trip.plan" in out
    assert metric("dream_entries_summarized_total") - summarized == 12
    assert metric("dream_llm_cost_dollars_total") - cost == pytest.approx(0.12)
    (request,) = llm.requests
    assert all(key in request["messages"][1]["content"] for key, _, _ in TRIP)

    # Recall and the list show the summaries only; the originals are kept, superseded.
    recalled = agent_a_api.get(f"{BASE}/{U}/visible").json()
    assert sorted(e["key"] for e in recalled) == ["trip.days", "trip.money", "trip.plan"]
    assert {e["sourceAgentId"] for e in recalled} == {
        "agent-a"
    }  # the same agents see them as saw the sources
    everything = agent_a_api.get(f"{BASE}/{U}", {"includeSuperseded": "true"}).json()
    assert len(everything) == 15
    by_id = {e["id"]: e for e in everything}
    plan = next(e for e in recalled if e["key"] == "trip.plan")
    assert [by_id[i]["supersededBy"] for i in ids[:4]] == [plan["id"]] * 4
    assert all(by_id[i]["validTo"] for i in ids)
    provenance = MemoryEntry.objects.get(id=internal_id(plan["id"])).provenance
    assert provenance["sourceEntries"] == [internal_id(i) for i in ids[:4]]
    assert (
        provenance["agents"] == ["agent-a"]
        and provenance["model"] == "test-model"
        and provenance["run"] == run.pk
    )
    # History shows both: the original's write and its superseding, the summary's creation by Dream.
    original = agent_a_api.get(f"{BASE}/entry/{ids[0]}/history").json()
    assert [e["action"] for e in original] == ["created", "superseded"]
    assert original[1]["actorType"] == "dream" and original[1]["oldValue"] == TRIP[0][1]
    created = agent_a_api.get(f"{BASE}/entry/{plan['id']}/history").json()
    assert [(e["action"], e["actorType"]) for e in created] == [("created", "dream")]
    # A second cycle finds nothing left to summarise: summaries are not summarised again.
    run_dream("--no-progress")
    assert len(llm.requests) == 1

    # GDPR erasure removes all of it: summaries, originals, history.
    erased = admin_api.delete(f"{BASE}/{U}").json()
    assert erased["entriesDeleted"] == 15
    assert not MemoryEntry.objects.filter(user_id=U).exists()
    assert admin_api.get(f"{BASE}/{U}", {"includeSuperseded": "true"}).json() == []


def _groups(client: Any) -> dict[str, list[str]]:
    """Three groups of four entries, by category."""
    groups = {}
    for category in ("context", "fact", "preference"):
        facts = [(f"{category}/{n}", f"{category} number {n}", category) for n in range(4)]
        groups[category] = write(client, facts)
    return groups


def _one_summary(ids: list[str], key: str) -> Answer:
    body = {"summaries": [{"key": key, "value": f"all of {key}", "sources": [internal_id(i) for i in ids]}]}
    return Answer(body, input_tokens=1000, output_tokens=200)


def test_the_cost_cap_stops_a_cycle_part_way_with_nothing_half_done(llm, agent_a, agent_a_api, dream_policy):
    groups = _groups(agent_a_api)
    # $0.12 a call; the third call's prompt alone (about $0.01) would take $0.24 past $0.25.
    dream_policy(
        agent_a,
        prune_stale_after_days=0,
        summarize_interactions=True,
        summarize_min_entries=3,
        summarize_target_entries=2,
        max_cost_per_run=0.25,
    )
    llm.answers = [_one_summary(groups["context"], "ctx"), _one_summary(groups["fact"], "facts")]

    out, _ = run_dream("--no-progress")

    run = DreamRun.objects.get()
    assert len(llm.requests) == 2
    assert run.status == "succeeded" and float(run.llm_cost) == pytest.approx(0.24)
    assert (run.entries_summarized, run.summaries_written) == (8, 2)
    assert run.details["summaries"]["stoppedByCostCap"] == ["agent-a"]
    assert "stopped at maxCostPerRun" in out
    current = {e["key"] for e in agent_a_api.get(f"{BASE}/{U}").json()}
    assert current == {"ctx", "facts", *(f"preference/{n}" for n in range(4))}
    untouched = MemoryEntry.objects.filter(id__in=groups["preference"])
    assert all(e.superseded_by_id is None and e.valid_to is None for e in untouched)


@pytest.mark.parametrize(
    "answer",
    [
        Answer("Sure! Here are your summaries: trip, money, days."),  # not JSON
        Answer({"summaries": [{"key": "x", "value": "y", "sources": [999999]}]}),  # an entry not in the group
        Answer({"summaries": [{"key": "x", "value": "y"}]}),  # no sources
        Answer(status=500),
    ],
)
def test_a_failed_or_malformed_answer_changes_nothing_and_is_counted(
    llm, answer, agent_a, agent_a_api, dream_policy
):
    ids = write(agent_a_api, TRIP)
    dream_policy(agent_a, prune_stale_after_days=0, summarize_interactions=True, summarize_min_entries=10)
    llm.answers = [answer]
    before = sorted((e["key"], e["value"]) for e in agent_a_api.get(f"{BASE}/{U}").json())
    failed = metric("dream_summarization_failed_total")

    out, _ = run_dream("--no-progress")

    run = DreamRun.objects.get()
    assert run.status == "succeeded" and run.summarization_failures == 1 and run.entries_summarized == 0
    (failure,) = run.details["summaries"]["failures"]
    assert failure["userId"] == U and failure["error"]
    assert failure["error"] in out
    assert metric("dream_summarization_failed_total") - failed == 1
    after = sorted(
        (e["key"], e["value"]) for e in agent_a_api.get(f"{BASE}/{U}", {"includeSuperseded": "true"}).json()
    )
    assert after == before
    rows = [internal_id(i) for i in ids]
    assert not MemoryEntry.objects.filter(id__in=rows, superseded_by__isnull=False).exists()


def test_a_failure_does_not_stop_the_other_groups(llm, agent_a, agent_a_api, dream_policy):
    groups = _groups(agent_a_api)
    dream_policy(agent_a, prune_stale_after_days=0, summarize_interactions=True, summarize_min_entries=3)
    llm.answers = [
        Answer("{not json"),
        _one_summary(groups["fact"], "facts"),
        _one_summary(groups["preference"], "prefs"),
    ]

    run_dream("--no-progress")

    run = DreamRun.objects.get()
    assert (run.summarization_failures, run.entries_summarized, run.summaries_written) == (1, 8, 2)
    keys = {e["key"] for e in agent_a_api.get(f"{BASE}/{U}").json()}
    assert keys == {"facts", "prefs", *(f"context/{n}" for n in range(4))}


def test_without_an_llm_the_cycle_says_so_and_goes_on(agent_a, agent_a_api, dream_policy):
    write(agent_a_api, TRIP)
    dream_policy(agent_a, prune_stale_after_days=0, summarize_interactions=True, summarize_min_entries=10)
    with override_settings(LLM_PROVIDER=""):
        run_dream("--no-progress")
    run = DreamRun.objects.get()
    assert run.status == "succeeded" and "LLM_PROVIDER" in run.details["summariesSkipped"]
    assert len(agent_a_api.get(f"{BASE}/{U}").json()) == 12


def test_the_summary_settings_are_checked(admin_api, agent_a):
    url = f"/v1/agents/{agent_a.id}"
    for bad in (
        {"summarizeGroupBy": "colour"},
        {"summarizeMinEntries": 3, "summarizeTargetEntries": 3},
        {"semanticContradictionThreshold": 1.5},
    ):
        response = admin_api.patch(url, {"memoryPolicy": {"dreamConfig": bad}}, format="json")
        assert response.status_code == 400, (bad, response.content)
    good = {"summarizeGroupBy": "key_prefix", "summarizeMinEntries": 6, "summarizeTargetEntries": 2}
    config = admin_api.patch(url, {"memoryPolicy": {"dreamConfig": good}}, format="json").json()
    assert {k: config["memoryPolicy"]["dreamConfig"][k] for k in good} == good


@pytest.fixture
def staff_client(client):  # type: ignore[no-untyped-def]
    user = User.objects.create_superuser("boss", "boss@example.com", "pw-for-tests-only")
    client.force_login(user)
    return client


def test_a_dry_run_shows_the_diff_in_the_command_and_the_admin_and_changes_nothing(
    llm, agent_a, agent_a_api, dream_policy, staff_client
):
    ids = write(agent_a_api, TRIP)
    dream_policy(agent_a, prune_stale_after_days=0, summarize_interactions=True, summarize_min_entries=10)
    llm.answers = [Answer(summaries_of(ids))]

    out, _ = run_dream("--no-progress", "--dry-run")

    run = DreamRun.objects.get()
    assert run.dry_run and run.entries_summarized == 12 and run.summaries_written == 3
    assert "entries would be summarized: 12 into 3 summaries" in out
    assert "+ traveller 'trip.plan': Lisbon in May" in out
    assert (
        f"- [{internal_id(ids[0])}] 'trip/1': the Lisbon trip in May, note 1" in out
    )  # staff see the rows' own ids
    assert len(agent_a_api.get(f"{BASE}/{U}").json()) == 12
    assert not MemoryEntry.objects.filter(superseded_by__isnull=False).exists()
    page = staff_client.get(reverse("admin:dream_dreamrun_change", args=[run.pk])).content.decode()
    assert "trip.plan" in page and "Hotel Avenida" in page and "not applied" in page
    assert f"[{internal_id(ids[0])}] <code>trip/1</code>: the Lisbon trip in May, note 1" in page
    assert "Approve summaries" not in page


@pytest.fixture
def waiting(llm, agent_a, agent_a_api, dream_policy):  # type: ignore[no-untyped-def]
    """The trip's 12 entries, a policy whose summaries need approval, and the LLM's answer for them."""
    ids = write(agent_a_api, TRIP)
    dream_policy(
        agent_a,
        prune_stale_after_days=0,
        summarize_interactions=True,
        summarize_min_entries=10,
        summarize_requires_approval=True,
    )
    llm.answers = [Answer(summaries_of(ids))]
    return ids


def test_summaries_that_need_approval_wait_for_staff(waiting, agent_a_api, staff_client):
    out, _ = run_dream("--no-progress")

    run = DreamRun.objects.get()
    assert run.approval == "pending" and "wait for staff approval" in out
    assert len(agent_a_api.get(f"{BASE}/{U}").json()) == 12  # nothing written yet
    url = reverse("admin:dream_dreamrun_change", args=[run.pk])
    page = staff_client.get(url).content.decode()
    assert "Approve summaries" in page and "pending approval" in page

    approve = reverse("admin:dream_dreamrun_approve", args=[run.pk])
    assert staff_client.post(approve, {"decision": "approve"}).status_code == 302

    run.refresh_from_db()
    assert (run.approval, run.entries_summarized, run.summaries_written) == ("approved", 12, 3)
    keys = sorted(e["key"] for e in agent_a_api.get(f"{BASE}/{U}").json())
    assert keys == ["trip.days", "trip.money", "trip.plan"]
    # A second decision changes nothing.
    staff_client.post(approve, {"decision": "approve"})
    assert MemoryEntry.objects.filter(user_id=U).count() == 15
    assert "Approve summaries" not in staff_client.get(url).content.decode()


def test_rejected_summaries_are_never_written(waiting, staff_client):
    run_dream("--no-progress")
    run = DreamRun.objects.get()
    staff_client.post(reverse("admin:dream_dreamrun_approve", args=[run.pk]), {"decision": "reject"})
    run.refresh_from_db()
    assert run.approval == "rejected"
    assert MemoryEntry.objects.filter(user_id=U).count() == 12
    again = staff_client.post(reverse("admin:dream_dreamrun_approve", args=[run.pk]), {"decision": "approve"})
    assert again.status_code == 302
    assert MemoryEntry.objects.filter(user_id=U).count() == 12


def test_approval_needs_the_run_permission(waiting, client):
    run_dream("--no-progress")
    run = DreamRun.objects.get()
    viewer = User.objects.create_user("viewer", password="pw-for-tests-only", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_dreamrun"))
    client.force_login(viewer)
    url = reverse("admin:dream_dreamrun_approve", args=[run.pk])
    assert client.post(url, {"decision": "approve"}).status_code == 403
    run.refresh_from_db()
    assert run.approval == "pending" and MemoryEntry.objects.filter(user_id=U).count() == 12
