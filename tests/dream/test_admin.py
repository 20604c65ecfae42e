"""Dream runs in the admin: a read-only list and detail, and the "Run Dream now" button."""

import io
import re
from html import unescape

import pytest
from django.contrib.auth.models import Permission, User
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone

from dream.models import DreamRun
from tests.helpers import Broker, publishing_to
from usermemory.models import MemoryEntry

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff_client(client):  # type: ignore[no-untyped-def]
    user = User.objects.create_superuser("boss", "boss@example.com", "pw-for-tests-only")
    client.force_login(user)
    return client


@pytest.fixture
def finished_run() -> DreamRun:
    now = timezone.now()
    return DreamRun.objects.create(
        status=DreamRun.Status.FAILED,
        started_at=now,
        heartbeat_at=now,
        finished_at=now,
        entries_pruned=7,
        error="RuntimeError: boom",
    )


def test_runs_are_listed_with_filters_and_the_run_button(staff_client, finished_run):
    response = staff_client.get(reverse("admin:dream_dreamrun_changelist") + "?status__exact=failed")

    body = response.content.decode()
    assert response.status_code == 200
    assert "Run Dream now" in body
    assert reverse("admin:dream_dreamrun_run_now") in body
    assert f"/admin/dream/dreamrun/{finished_run.pk}/change/" in body
    assert response.context["cl"].result_count == 1

    other = staff_client.get(reverse("admin:dream_dreamrun_changelist") + "?status__exact=succeeded")
    assert other.context["cl"].result_count == 0


def test_run_detail_is_read_only(staff_client, finished_run):
    url = reverse("admin:dream_dreamrun_change", args=[finished_run.pk])

    response = staff_client.get(url)

    assert response.status_code == 200
    assert "RuntimeError: boom" in response.content.decode()
    assert 'name="_save"' not in response.content.decode()
    assert staff_client.post(url, {"status": "succeeded"}).status_code == 403
    finished_run.refresh_from_db()
    assert finished_run.status == DreamRun.Status.FAILED
    assert staff_client.get(reverse("admin:dream_dreamrun_add")).status_code == 403


def test_run_now_says_so_when_the_broker_does_not_take_the_cycle(staff_client, agent_a, dream_policy, memory):
    """The button enqueues the cycle (tests/dream/test_tasks.py runs it on real workers); a broker that does
    not answer (nothing listens on this Redis port) takes nothing, and the page says so."""
    dream_policy(agent_a)
    memory(agent_a, "old", updated_days=60)

    with publishing_to(Broker("redis", "redis://127.0.0.1:1/0", {})):
        response = staff_client.post(reverse("admin:dream_dreamrun_run_now"), follow=True)

    assert response.status_code == 200
    assert "The broker did not take the cycle" in unescape(response.content.decode())
    assert not DreamRun.objects.exists()


def test_run_now_needs_the_permission_and_a_post(client, staff_client):
    assert staff_client.get(reverse("admin:dream_dreamrun_run_now")).status_code == 405

    viewer = User.objects.create_user("viewer", password="pw-for-tests-only", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_dreamrun"))
    client.force_login(viewer)
    assert client.post(reverse("admin:dream_dreamrun_run_now")).status_code == 403
    page = client.get(reverse("admin:dream_dreamrun_changelist"))
    assert page.status_code == 200 and "Run Dream now" not in page.content.decode()
    assert not DreamRun.objects.exists()


def _open_count(html: str) -> str:
    found = re.search(r'id="open-conflicts">(.*?)</', html, flags=re.S)
    assert found is not None, "no open-conflicts count on the page"
    return re.sub(r"<[^>]+>|\D", "", found.group(1))


def test_one_count_of_open_conflicts_on_the_overview_dream_runs_and_the_conflicts_page(
    staff_client, agent_a, agent_b, agent_a_api, agent_b_api, dream_policy
):
    """Issue 46, part 7: a set is a user's entries that disagree on a key, with their partners by meaning;
    the overview, Dream's runs and the Conflicts page count them alike, and name entries as the pages show
    them, never by their row numbers."""
    writes = [
        (agent_a_api, "mover", "city", "Berlin"),  # a pair by meaning: one set of two keys
        (agent_a_api, "mover", "home_town", "Munich"),
        (agent_a_api, "caller", "phone", "+49 30 1234"),  # one key, two agents: one set
        (agent_b_api, "caller", "phone", "+49 171 5678"),
        (agent_a_api, "polyglot", "language", "German"),  # one key, three values: one set
        (agent_b_api, "polyglot", "language", "English"),
    ]
    for client, user, key, value in writes:
        body = {"userId": user, "key": key, "value": value}
        response = client.put("/usermemorystore/memories", body, format="json")
        assert response.status_code == 201, response.content
    MemoryEntry.objects.create(
        user_id="polyglot",
        key="language",
        value="French",
        value_text="French",
        category="fact",
        visibility="global",
        created_at=timezone.now(),
        updated_at=timezone.now(),
    )
    dream_policy(agent_a, prune_stale_after_days=0, cross_agent_maintenance=True)
    call_command("dream", "--no-progress", stdout=io.StringIO())
    run = DreamRun.objects.get()
    assert (run.contradictions_found, run.entries_flagged) == (3, 7)

    def counts() -> dict[str, str]:
        overview = staff_client.get(reverse("admin-overview")).content.decode()
        runs = staff_client.get(reverse("admin:dream_dreamrun_changelist"))
        conflicts = staff_client.get(reverse("admin:usermemory_memoryconflict_changelist"))
        return {
            "overview": re.sub(r"\D", "", re.search(r'id="open-conflicts">(.*?)<', overview).group(1)),
            "dream runs": _open_count(runs.content.decode()),
            "conflicts page": _open_count(conflicts.content.decode()),
            "sets listed": str(len(conflicts.context["sets"])),
        }

    assert counts() == dict.fromkeys(["overview", "dream runs", "conflicts page", "sets listed"], "3")
    listed = staff_client.get(reverse("admin:dream_dreamrun_changelist")).content.decode()
    assert '<td class="field-sets_flagged">3</td>' in listed and "CONTRADICTIONS" not in listed.upper()

    # The run's pairs by meaning name each entry by its key, linked to its page.
    city = MemoryEntry.objects.get(user_id="mover", key="city")
    home = MemoryEntry.objects.get(user_id="mover", key="home_town")
    page = staff_client.get(reverse("admin:dream_dreamrun_change", args=[run.pk])).content.decode()
    pairs = re.search(r'<ul class="meaning-pairs">(.*?)</ul>', page, flags=re.S)
    assert pairs is not None
    for entry in (city, home):
        url = reverse("admin:usermemory_memoryentry_change", args=[entry.pk])
        assert f'<a href="{url}"><code>{entry.key}</code></a>' in pairs.group(1)
    assert unescape(re.sub(r"<[^>]+>", "", pairs.group(1))).split() == ["mover:", "city", "↔", "home_town"]

    # Settled: the message names what was kept as the page lists it, and every count says 2.
    response = staff_client.post(
        reverse("admin:usermemory_memoryconflict_changelist"),
        {
            "user_id": "mover",
            "keys": "city / home_town",
            "entry": [city.pk, home.pk],
            "keep": city.pk,
            "mode": "update",  # no action is preselected: staff choose one
        },
        follow=True,
    )
    settled = [str(m) for m in response.context["messages"]]
    assert settled == [
        "Settled mover / city / home_town: kept city = Berlin (agent agent-a); 1 other entry now holds it."
    ]
    assert str(city.pk) not in settled[0].replace("agent-a", "")
    assert counts() == dict.fromkeys(["overview", "dream runs", "conflicts page", "sets listed"], "2")
