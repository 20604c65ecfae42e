"""Dream runs in the admin: a read-only list and detail, and the "Run Dream now" button."""

import pytest
from django.contrib.auth.models import Permission, User
from django.urls import reverse
from django.utils import timezone

from dream.models import DreamRun

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


def test_run_now_enqueues_a_cycle_after_commit(
    staff_client, agent_a, dream_policy, memory, django_capture_on_commit_callbacks, monkeypatch
):
    from memoryplatform.celery import app

    monkeypatch.setitem(app.conf, "task_always_eager", True)  # run it here even when REDIS_URL is set
    dream_policy(agent_a)
    memory(agent_a, "old", updated_days=60)

    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        response = staff_client.post(reverse("admin:dream_dreamrun_run_now"))

    assert response.status_code == 302
    assert len(callbacks) == 1
    run = DreamRun.objects.get()
    assert (run.trigger, run.status, run.entries_pruned) == ("admin", "succeeded", 1)


def test_run_now_needs_the_permission_and_a_post(client, staff_client):
    assert staff_client.get(reverse("admin:dream_dreamrun_run_now")).status_code == 405

    viewer = User.objects.create_user("viewer", password="pw-for-tests-only", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_dreamrun"))
    client.force_login(viewer)
    assert client.post(reverse("admin:dream_dreamrun_run_now")).status_code == 403
    page = client.get(reverse("admin:dream_dreamrun_changelist"))
    assert page.status_code == 200 and "Run Dream now" not in page.content.decode()
    assert not DreamRun.objects.exists()
