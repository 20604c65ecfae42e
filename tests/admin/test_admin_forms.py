"""The admin's forms: lists edited as lists, labels beside their fields, one error with help text, and a
Dream run's page that reads "LLM cost" with its details as a table."""

import pytest
from django.utils import timezone

from apikeys.models import Agent, ApiKey
from dream.models import DreamRun
from tests.factories import AgentGroupFactory
from tests.helpers import public_id
from usermemory.models import AgentMemoryPolicy

pytestmark = pytest.mark.django_db(transaction=True)


def test_agent_form_edits_lists_as_lists_with_groups_beside_their_label(page):
    AgentGroupFactory(id="support")
    AgentGroupFactory(id="billing")
    page.goto(f"{page.base}/admin/apikeys/agent/add/")
    page.fill("#id_id", "helper")
    page.fill("#id_capabilities", "chat\nsearch\n\n")
    page.check("input[name=groups][value=support]")
    page.fill("#id_memory_policy-0-allowed_categories", "fact\npreference")
    page.shots("agent-form")
    label = (
        page.locator("label[for=id_groups_0]").first.bounding_box()
        or page.locator(".field-groups > div > label").first.bounding_box()
    )
    heading = page.locator(".field-groups label").first.bounding_box()
    boxes = page.locator("#id_groups").bounding_box()
    assert heading["x"] < boxes["x"] and abs(heading["y"] - boxes["y"]) < 20, (heading, boxes, label)
    assert "Not Django's staff permission groups" in page.inner_text(".field-groups")
    page.click("input[name=_save]")
    page.wait_for_selector(".messagelist .success")
    agent = Agent.objects.get(id="helper")
    assert agent.capabilities == ["chat", "search"]
    assert list(agent.groups.values_list("id", flat=True)) == ["support"]
    assert AgentMemoryPolicy.objects.get(agent=agent).allowed_categories == ["fact", "preference"]

    page.goto(f"{page.base}/admin/apikeys/agent/helper/change/")
    assert page.input_value("#id_capabilities") == "chat\nsearch"
    # Django's permission groups are not listed beside the agent groups.
    page.goto(f"{page.base}/admin/")
    assert page.locator("a", has_text="Agent groups").count() >= 1
    assert page.locator("a[href='/admin/auth/group/']").count() == 0


def test_add_key_form_gives_one_error_with_help_text(page):
    page.goto(f"{page.base}/admin/apikeys/apikey/add/")
    assert "Leave empty for a viewer or admin key" in page.inner_text("#apikey_form")
    page.select_option("#id_role", "agent")
    page.click("input[name=_save]")
    page.wait_for_selector(".errorlist")
    page.shots("key-error")
    errors = page.locator(".errorlist li")
    assert errors.count() == 1 and errors.first.inner_text() == "An agent key needs an agent."
    assert ApiKey.objects.count() == 0

    # No role at all: one error, on the role (issue 47), not a second one naming the roles above the form.
    page.select_option("#id_role", "")
    page.click("input[name=_save]")
    page.wait_for_selector(".errorlist")
    page.shots("key-no-role")
    errors = page.locator(".errorlist li")
    assert errors.all_inner_texts() == ["This field is required."]
    assert page.locator(".field-role .errorlist").count() == 1
    assert ApiKey.objects.count() == 0


def test_dream_run_page_reads_llm_cost_with_details_as_a_table(page):
    now = timezone.now()
    run = DreamRun.objects.create(
        status="succeeded",
        started_at=now,
        finished_at=now,
        heartbeat_at=now,
        llm_cost="0.012500",
        details={"agents": {"a": {"pruned": 2}}, "meaning": {"pairCount": 1, "pairs": [[1, 2]]}},
    )
    page.goto(f"{page.base}/admin/dream/dreamrun/{run.pk}/change/")
    page.shots("dream-run")
    assert "LLM cost" in page.inner_text("#content")
    table = page.locator(".field-details_table table.details-table").first
    assert table.is_visible()
    assert "pairCount" in table.inner_text() and "[[1, 2]]" not in table.inner_text()
    # Entries gone since are named by their public ids, as the API named them; no row number shows.
    pairs = table.locator(".meaning-pairs li").first.inner_text()
    assert pairs == f"{public_id(1)} (gone) ↔ {public_id(2)} (gone)", pairs
