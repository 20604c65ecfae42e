"""Staff work on memories in a real browser: correct a value, settle conflict sets, and see what each agent
sees."""

import pytest

from apikeys.caller import Caller
from tests.factories import AgentFactory
from usermemory.models import MemoryEntry, MemoryEvent
from usermemory.services import MemoryWrite, memory_upsert

pytestmark = pytest.mark.django_db(transaction=True)


def _write(agent_id: str, user_id: str, key: str, value: object, **fields: object) -> MemoryEntry:
    agent = AgentFactory(id=agent_id)
    caller = Caller(role="agent", agent=agent)
    return memory_upsert(
        caller=caller, write=MemoryWrite(user_id=user_id, key=key, value=value, **fields)
    ).entry


def test_staff_correct_a_value_and_history_names_them(page):
    entry = _write("support-bot", "user-7", "city", "Berln")
    page.goto(f"{page.base}/admin/usermemory/memoryentry/{entry.pk}/change/")
    page.click("#correct-value")
    assert page.input_value("#id_value") == "Berln"
    page.fill("#id_value", "Berlin")
    page.shots("correct-form")
    page.click("input[name=correct]")
    page.wait_for_selector(".messagelist .success")
    page.shots("corrected")
    entry.refresh_from_db()
    assert entry.value == "Berlin" and entry.source_agent_id == "support-bot" and entry.visibility == "self"
    event = MemoryEvent.objects.filter(entry_id=entry.pk, action="updated").get()
    assert (event.actor_type, event.actor_id) == ("staff", "staff")
    assert (event.old_value, event.new_value) == ("Berln", "Berlin")
    assert "Berlin" in page.inner_text("body")  # the entry's page, its history inline with the staff user

    # A JSON value, and text that is not JSON, which is refused without a change.
    page.click("#correct-value")
    page.check("#id_as_json")
    page.fill("#id_value", "{not json")
    page.click("input[name=correct]")
    page.wait_for_selector(".errorlist")
    entry.refresh_from_db()
    assert entry.value == "Berlin"
    page.fill("#id_value", '{"city": "Berlin", "since": 2019}')
    page.click("input[name=correct]")
    page.wait_for_selector(".messagelist .success")
    entry.refresh_from_db()
    assert entry.value == {"city": "Berlin", "since": 2019}
