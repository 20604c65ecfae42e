"""A key is minted once: the add form posts, redirects, and the page it lands on shows the key from the
session once; a reload shows it no more and mints nothing."""

import re

import pytest
from rest_framework.test import APIClient

from apikeys.models import ApiKey
from tests.factories import AgentFactory

pytestmark = pytest.mark.django_db(transaction=True)


def _add_key(page, label: str) -> str:
    page.goto(f"{page.base}/admin/apikeys/apikey/add/")
    page.select_option("#id_role", "agent")
    page.fill("#id_agent", "support-bot")
    page.fill("#id_label", label)
    page.click("input[name=_save]")
    page.wait_for_selector("#raw-key")
    return page.input_value("#raw-key")


def test_a_new_key_is_shown_once_and_a_reload_mints_no_second_key(page):
    AgentFactory(id="support-bot")
    raw_key = _add_key(page, "shown once")
    key = ApiKey.objects.get(label="shown once")
    assert re.fullmatch(r"mp_[0-9a-f]{8}_[A-Za-z0-9_-]{20,}", raw_key)
    assert raw_key.startswith(f"mp_{key.prefix}")
    # Post-redirect-get: the page showing the key is a GET of its own.
    assert page.url.endswith(f"/admin/apikeys/apikey/{key.pk}/created/")
    page.shots("created")

    page.reload()
    page.wait_for_selector(".messagelist .warning")
    page.shots("reloaded")
    assert raw_key not in page.content()
    assert key.prefix in page.content()
    assert page.url.endswith(f"/admin/apikeys/apikey/{key.pk}/change/")
    assert ApiKey.objects.count() == 1  # the reload minted nothing

    page.go_back()  # the created page again, from the history: still nothing to show
    assert raw_key not in page.content()
    assert ApiKey.objects.count() == 1

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw_key}")
    assert client.get("/v1/agents/me").json()["id"] == "support-bot"


def test_a_second_key_shows_its_own_secret(page):
    AgentFactory(id="support-bot")
    first = _add_key(page, "first")
    second = _add_key(page, "second")
    assert first != second
    assert ApiKey.objects.count() == 2
    assert page.url.endswith(f"/{ApiKey.objects.get(label='second').pk}/created/")
