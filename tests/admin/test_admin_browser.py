"""Staff run the platform from the admin: each flow in a real browser."""

import re
import time

import pytest
from rest_framework.test import APIClient

from apikeys.models import Agent, ApiKey
from tests.factories import AgentFactory
from tests.helpers import celery_worker, database_broker, publishing_to
from usermemory.models import MemoryEntry, MemoryEvent

pytestmark = pytest.mark.django_db(transaction=True)


def test_sign_in_lands_on_the_admin_index(page):
    page.shot("index")
    assert page.locator("#site-name").is_visible()
    assert page.locator("a", has_text="Agents").first.is_visible()
    assert page.locator("a", has_text="Conflicts").first.is_visible()


def test_create_agent_and_key_see_it_once_then_revoke(page):
    page.goto(f"{page.base}/admin/apikeys/agent/add/")
    page.fill("#id_id", "support-bot")
    page.fill("#id_display_name", "Support bot")
    page.fill("#id_capabilities", "chat\n  search \n")
    page.shot("agent-form")
    page.click("input[name=_save]")
    page.wait_for_selector(".messagelist .success")
    assert Agent.objects.get(id="support-bot", display_name="Support bot").capabilities == ["chat", "search"]

    page.goto(f"{page.base}/admin/apikeys/apikey/add/")
    page.select_option("#id_role", "agent")
    page.fill("#id_agent", "support-bot")
    page.fill("#id_label", "browser test")
    page.click("input[name=_save]")
    raw_key = page.input_value("#raw-key")
    page.shot("key-created")
    assert re.fullmatch(r"mp_[0-9a-f]{8}_[A-Za-z0-9_-]{20,}", raw_key)
    assert page.locator("#copy-key").is_visible()
    key = ApiKey.objects.get(label="browser test")
    assert raw_key not in key.digest

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw_key}")
    assert client.get("/v1/agents/me").json()["id"] == "support-bot"

    # Shown once: the key's own page and the list show the prefix, never the secret.
    page.goto(f"{page.base}/admin/apikeys/apikey/{key.pk}/change/")
    assert raw_key not in page.content() and key.prefix in page.content()
    page.goto(f"{page.base}/admin/apikeys/apikey/")
    assert raw_key not in page.content()

    page.check(f"input[name=_selected_action][value='{key.pk}']")
    page.select_option("select[name=action]", "revoke_keys")
    page.click("button[name=index]")
    page.wait_for_selector("#confirm-revoke")
    page.shot("revoke-confirm")
    key.refresh_from_db()
    assert key.revoked_at is None  # asking is not doing
    page.click("#confirm-revoke")
    page.wait_for_selector(".messagelist .success")
    page.shot("revoked")
    key.refresh_from_db()
    assert key.revoked_at is not None
    assert client.get("/v1/agents/me").status_code == 401


def _conflict(user_id: str = "user-c") -> tuple[MemoryEntry, MemoryEntry]:
    from django.utils import timezone

    a, b = AgentFactory(id="agent-x"), AgentFactory(id="agent-y")
    now = timezone.now()
    common = {
        "user_id": user_id,
        "key": "language",
        "category": "fact",
        "visibility": "self",
        "conflicted": True,
        "created_at": now,
        "updated_at": now,
    }
    first = MemoryEntry.objects.create(value="English", value_text="English", source_agent=a, **common)
    second = MemoryEntry.objects.create(value="German", value_text="German", source_agent=b, **common)
    MemoryEntry.objects.create(
        user_id=user_id,
        key="calm",
        value="yes",
        value_text="yes",
        category="fact",
        visibility="global",
        created_at=now,
        updated_at=now,
    )
    return first, second


def test_filter_memories_by_conflicted(page):
    _conflict()
    page.goto(f"{page.base}/admin/usermemory/memoryentry/?conflicted__exact=1")
    page.shot("conflicted-filter")
    rows = page.locator("#result_list tbody tr")
    assert rows.count() == 2
    assert "calm" not in page.locator("#result_list").inner_text()


def test_resolve_a_conflict(page):
    english, german = _conflict()
    page.goto(f"{page.base}/admin/usermemory/memoryconflict/")
    page.shot("conflicts")
    page.check(f"#keep-{german.id}")
    page.check(".conflict-set input[name=mode][value=update]")  # no action is preselected
    page.click(".conflict-set input[type=submit]")
    page.wait_for_selector(".messagelist .success")
    page.shot("resolved")
    english.refresh_from_db()
    assert english.value == "German" and not english.conflicted
    assert not MemoryEntry.objects.filter(conflicted=True).exists()
    assert MemoryEvent.objects.filter(action="resolved").count() == 2
    assert page.locator("#no-conflicts").is_visible()


def test_erase_a_user_with_confirm(page):
    _conflict("user-gone")
    page.goto(f"{page.base}/admin/usermemory/userdatarequest/")
    page.fill("#id_user_id", "user-gone")
    page.fill("#id_confirmation", "confirm")
    page.click("input[name=erase]")
    page.wait_for_selector(".errorlist")
    page.shot("erase-refused")
    assert MemoryEntry.objects.filter(user_id="user-gone").count() == 3
    page.fill("#id_confirmation", "CONFIRM")
    page.click("input[name=erase]")
    page.wait_for_selector("#erase-report")
    page.shot("erased")
    assert '"entriesDeleted": 3' in page.inner_text("#erase-report")
    assert not MemoryEntry.objects.filter(user_id="user-gone").exists()


def test_run_dream_now(page, tmp_path):
    from datetime import timedelta

    from django.utils import timezone

    from dream.models import DreamPolicy, DreamRun

    agent = AgentFactory(id="dreamer")
    DreamPolicy.objects.create(agent=agent, dream_enabled=True, prune_stale_after_days=30)
    long_ago = timezone.now() - timedelta(days=90)
    MemoryEntry.objects.create(
        user_id="u",
        key="old",
        value="x",
        value_text="x",
        category="fact",
        visibility="self",
        source_agent=agent,
        created_at=long_ago,
        updated_at=long_ago,
    )

    broker = database_broker()  # the embedded default's, as `manage.py serve` runs a worker on it
    with celery_worker(tmp_path / "worker.log", broker), publishing_to(broker):
        page.goto(f"{page.base}/admin/dream/dreamrun/")
        page.click("text=Run Dream now")
        page.wait_for_selector(".messagelist .success")
        page.shot("dream-queued")
        deadline = time.monotonic() + 90
        while not DreamRun.objects.filter(trigger="admin").exclude(status="running").exists():
            assert time.monotonic() < deadline, "the worker ran no cycle in 90 s"
            time.sleep(0.1)
    run = DreamRun.objects.get(trigger="admin")
    assert run.status == "succeeded" and run.entries_pruned == 1
    assert not MemoryEntry.objects.filter(key="old").exists()
    page.goto(f"{page.base}/admin/dream/dreamrun/{run.pk}/change/")
    page.shot("dream-run")
    assert "succeeded" in page.content()
