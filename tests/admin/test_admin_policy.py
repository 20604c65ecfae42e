"""An agent's whole policy on its admin page: one inline a part (usermemory's, Dream's laid out pass by pass,
extraction's, activity's), each in its app's table, saved through the policy service in the admin's one
transaction (issue 48). Django's test client submits the page's own form, as a browser would."""

from html.parser import HTMLParser

import pytest

from activity.models import ActivityPolicy
from dream.models import DreamPolicy
from dream.passes import PASSES
from extraction.models import ExtractionPolicy
from tests.factories import AgentFactory
from usermemory.models import AgentMemoryPolicy
from usermemory.policies import policy_parts

URL = "/admin/apikeys/agent/agent-a/change/"
PREFIXES = {"memory": "memory_policy", "dream": "dream_policy", "extraction": "extraction_policy"}


class _Form(HTMLParser):
    """The values the page's change form would submit, and its fieldset headings."""

    def __init__(self) -> None:
        super().__init__()
        self.values: dict[str, str] = {}
        self.headings: list[str] = []
        self._select: str | None = None
        self._textarea: str | None = None
        self._heading = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        name = a.get("name", "")
        if tag == "input" and name and a.get("type") not in ("submit", "button"):
            if a.get("type") != "checkbox" or "checked" in a:
                self.values[name] = a.get("value", "on" if a.get("type") == "checkbox" else "")
        elif tag == "select" and name:
            self._select = name
        elif tag == "option" and self._select and "selected" in a:
            self.values[self._select] = a.get("value", "")
        elif tag == "textarea" and name:
            self._textarea = name
            self.values[name] = ""
        elif tag in ("h2", "h3", "h4") and "fieldset-heading" in a.get("class", ""):
            self._heading = True

    def handle_endtag(self, tag: str) -> None:
        if tag == "select":
            self._select = None
        elif tag == "textarea":
            self._textarea = None
        elif tag in ("h2", "h3", "h4"):
            self._heading = False

    def handle_data(self, data: str) -> None:
        if self._textarea:
            self.values[self._textarea] += data.lstrip("\n")
        elif self._heading and data.strip():
            self.headings.append(data.strip())


def _form(admin_client) -> _Form:
    response = admin_client.get(URL)
    assert response.status_code == 200
    form = _Form()
    form.feed(response.content.decode())
    return form


def _field(part: str, name: str) -> str:
    return f"{PREFIXES.get(part, part + '_policy')}-0-{name}"


@pytest.fixture
def agent_a(db):
    return AgentFactory(id="agent-a", display_name="Agent A")


def test_the_agent_page_edits_every_field_of_every_part(admin_client, agent_a):
    form = _form(admin_client)
    for part in policy_parts():
        for name in part.fields:
            if part.model._meta.get_field(name).get_internal_type() == "BooleanField":
                continue  # an unchecked box submits nothing
            assert _field(part.name, name) in form.values, (part.name, name)
    # Dream's part is laid out pass by pass.
    for step in PASSES:
        if step.policy_fields:
            assert step.title in form.headings


def test_a_save_writes_each_part_in_its_own_table(admin_client, agent_a):
    values = _form(admin_client).values
    values[_field("memory", "max_recall_entries")] = "9"
    values[_field("dream", "dream_enabled")] = "on"
    values[_field("dream", "summarize_min_entries")] = "6"
    values[_field("dream", "summarize_target_entries")] = "2"
    values[_field("extraction", "extraction_visibility")] = "group"
    values[_field("activity", "tool_call_retention_days")] = "4"
    response = admin_client.post(URL, values)
    assert response.status_code == 302, response.content.decode()[:2000]

    assert AgentMemoryPolicy.objects.get(agent=agent_a).max_recall_entries == 9
    dream = DreamPolicy.objects.get(agent=agent_a)
    assert (dream.dream_enabled, dream.summarize_min_entries, dream.summarize_target_entries) == (True, 6, 2)
    assert ExtractionPolicy.objects.get(agent=agent_a).extraction_visibility == "group"
    assert ActivityPolicy.objects.get(agent=agent_a).tool_call_retention_days == 4


def test_values_that_do_not_hold_together_are_a_form_error_and_nothing_is_saved(admin_client, agent_a):
    values = _form(admin_client).values
    values[_field("memory", "max_recall_entries")] = "9"
    values[_field("dream", "summarize_min_entries")] = "5"
    values[_field("dream", "summarize_target_entries")] = "5"
    response = admin_client.post(URL, values)
    assert response.status_code == 200
    assert (
        "summarizeTargetEntries must be at least 1 and less than summarizeMinEntries."
        in response.content.decode()
    )
    assert not AgentMemoryPolicy.objects.filter(agent=agent_a).exists()
    assert not DreamPolicy.objects.filter(agent=agent_a).exists()
