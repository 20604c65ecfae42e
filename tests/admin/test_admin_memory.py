"""Staff work on memories in a real browser: correct a value, settle conflict sets, and see what each agent
sees."""

import io

import pytest
from django.core.management import call_command

from apikeys.caller import Caller
from tests.factories import AgentFactory, policy_set
from usermemory.models import ConflictDismissal, MemoryEntry, MemoryEvent
from usermemory.services import MemoryWrite, memory_erase_user, memory_export_user, memory_upsert

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


def _dream() -> str:
    out = io.StringIO()
    call_command("dream", "--no-progress", stdout=out)
    return out.getvalue()


def _dream_everyone() -> None:
    policy_set(
        AgentFactory(id="agent-a"), dream_enabled=True, prune_stale_after_days=0, cross_agent_maintenance=True
    )


def test_a_contradiction_by_meaning_is_one_set_settled_by_keeping_one_value(page):
    _dream_everyone()
    city = _write("agent-a", "mover", "city", "Berlin")
    home = _write("agent-a", "mover", "home_town", "Hamburg")
    assert "contradictions found: 1 " in _dream()  # one set, two entries flagged

    page.goto(f"{page.base}/admin/usermemory/memoryconflict/")
    page.shots("meaning-set")
    sets = page.locator(".conflict-set")
    assert sets.count() == 1
    assert sets.first.get_attribute("data-keys") == "city home_town"
    assert sets.first.locator("tbody tr").count() == 2
    page.check(f"#keep-{city.pk}")
    page.check(".conflict-set input[name=mode][value=update]")  # no action is preselected
    page.click(".conflict-set input[type=submit]")
    page.wait_for_selector(".messagelist .success")
    assert "kept city = Berlin (agent agent-a); 1 other entry now holds it" in page.inner_text(".messagelist")
    page.shots("meaning-settled")
    home.refresh_from_db()
    city.refresh_from_db()
    assert (home.key, home.value, home.conflicted) == ("home_town", "Berlin", False)
    assert home.meaning_conflicts == []
    assert not city.conflicted
    assert page.locator("#no-conflicts").is_visible()
    assert "contradictions found: 0 " in _dream()
    assert not MemoryEntry.objects.filter(conflicted=True).exists()


def test_not_a_conflict_is_remembered_by_the_next_dream_run(page):
    _dream_everyone()
    _write("agent-a", "caller", "phone", "+49 30 1234")
    _write("agent-b", "caller", "phone", "+49 171 5678")
    assert "contradictions found: 1 " in _dream()
    page.goto(f"{page.base}/admin/usermemory/memoryconflict/")
    assert page.locator(".conflict-set").count() == 1
    page.check(".conflict-set input.dismiss")
    page.click(".conflict-set input[type=submit]")
    page.wait_for_selector(".messagelist .success")
    assert "not a conflict" in page.inner_text(".messagelist")
    page.shots("dismissed")
    assert not MemoryEntry.objects.filter(conflicted=True).exists()
    assert sorted(MemoryEntry.objects.values_list("value", flat=True)) == ["+49 171 5678", "+49 30 1234"]
    assert MemoryEvent.objects.filter(action="resolved", actor_id="staff").count() == 2

    assert "contradictions found: 0 " in _dream()  # both numbers stand
    assert not MemoryEntry.objects.filter(conflicted=True).exists()

    _write("agent-c", "caller", "phone", "+1 555 0100")  # a third number is news
    assert "contradictions found: 1 " in _dream()
    assert MemoryEntry.objects.filter(conflicted=True).count() == 3

    # The dismissal holds the user's values: the GDPR export lists it, erasure removes it.
    admin_caller = Caller(role="admin")
    export = memory_export_user(caller=admin_caller, user_id="caller")
    pairs = [(d["keyA"], d["textA"], d["keyB"], d["textB"]) for d in export["conflictDismissals"]]
    assert pairs == [("phone", "+49 171 5678", "phone", "+49 30 1234")]
    assert memory_erase_user(caller=admin_caller, user_id="caller")["conflictDismissalsDeleted"] == 1
    assert not ConflictDismissal.objects.exists()


def test_what_each_agent_sees_side_by_side_with_the_rule_that_admits_each_entry(page):
    from rest_framework.test import APIClient

    from apikeys.services import apikey_create
    from tests.factories import AgentGroupFactory

    a, b, c = AgentFactory(id="agent-a"), AgentFactory(id="agent-b"), AgentFactory(id="agent-c")
    AgentGroupFactory(id="support", members=[a, b])
    _write("agent-a", "u", "a_secret", "only a")
    _write("agent-a", "u", "team_note", "for support", visibility="group", group_ids=["support"])
    _write("agent-b", "u", "b_secret", "only b")
    _write("agent-c", "u", "tz", "CET", visibility="global")
    _write("agent-c", "other-user", "tz", "PST", visibility="global")

    entry = MemoryEntry.objects.get(key="tz", user_id="u")
    page.goto(f"{page.base}/admin/usermemory/memoryentry/{entry.pk}/change/")
    page.click("#agents-see")
    page.wait_for_selector(".agent-column")
    page.shots("agents-see")

    def seen(agent_id: str) -> dict[str, str]:
        rows = page.locator(f".agent-column[data-agent='{agent_id}'] tbody tr[data-key]")
        return {
            rows.nth(i).get_attribute("data-key"): rows.nth(i).get_attribute("data-rule")
            for i in range(rows.count())
        }

    assert seen("agent-a") == {"a_secret": "owner", "team_note": "group: support", "tz": "global"}
    assert seen("agent-b") == {"b_secret": "owner", "team_note": "group: support", "tz": "global"}
    assert seen("agent-c") == {"tz": "global"}
    # The API, with each agent's own key, reads the same entries.
    for agent in (a, b, c):
        _, raw = apikey_create(role="agent", agent_id=agent.id, label="check")
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
        keys = {e["key"] for e in client.get("/usermemorystore/memories/u").json()}
        assert keys == set(seen(agent.id))


def test_an_extracted_entry_shows_its_provenance_and_its_history_the_trigger(
    page, agent_a, agent_a_api, admin_api, set_policy
):
    """Issue 46, part 4: a background extraction that changed a value is named on the entry's page (trigger,
    extraction, the message it cites, model) and in its history; each link leads to the page it names."""
    from django.test import override_settings

    from extraction.models import Extraction
    from tests.extraction.conftest import PRICES, fact, facts
    from tests.extraction.test_background import conversation, run, say
    from tests.llm_server import LLMScript, llm_server

    set_policy(agent_a, extract_from_conversations=True)
    body = {"userId": "u1", "key": "home_city", "value": "Porto"}
    assert agent_a_api.put("/usermemorystore/memories", body, format="json").status_code == 201
    cid = conversation(admin_api)
    (said,) = say(agent_a_api, cid, "I moved back to Lisbon.")
    script = LLMScript([facts(fact("home_city", "Lisbon", sources=[0]))])
    llm = {"LLM_PROVIDER": "openai", "LLM_MODEL": "test-model", "LLM_PRICES": PRICES}
    with llm_server(script), override_settings(LLM_URL=script.url, **llm):
        run("agent-a")
    entry = MemoryEntry.objects.get(key="home_city")
    extraction = Extraction.objects.get()

    page.goto(f"{page.base}/admin/usermemory/memoryentry/{entry.pk}/change/")
    page.shots("extracted-entry")
    provenance = page.locator(".field-value_provenance table.provenance")
    shown = provenance.inner_text()
    assert "extraction (background)" in shown and "test-model" in shown and said in shown
    history = page.locator("#events-group")
    triggers = history.locator("td.field-trigger").all_inner_texts()
    assert [t.strip() for t in triggers] == ["API", "extraction (background)"]
    assert history.locator("td.field-messages").nth(1).inner_text().strip() == said

    provenance.locator("a", has_text=said).click()
    page.wait_for_selector(".field-content")
    assert "I moved back to Lisbon." in page.inner_text(".field-content")
    page.go_back()
    page.locator(".field-value_provenance a[href*='/extraction/extraction/']").click()
    page.wait_for_selector(".field-operations")
    assert page.url.endswith(f"/admin/extraction/extraction/{extraction.pk}/change/")
    assert "Lisbon" in page.inner_text(".field-operations")
