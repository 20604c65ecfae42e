"""Extractions in the admin: the list, and one extraction's proposals, accepted and rejected, read-only."""

import re
from html import unescape

import pytest
from django.contrib.auth.models import User
from django.test import override_settings
from django.urls import reverse

from extraction.models import Extraction
from tests.extraction.conftest import fact, facts
from tests.extraction.test_api import extract, put
from tests.extraction.test_background import conversation, run, say
from tests.helpers import internal_id, public_id
from usermemory.models import MemoryEntry


@pytest.fixture
def staff_client(client):  # type: ignore[no-untyped-def]
    user = User.objects.create_superuser("boss", "boss@example.com", "pw-for-tests-only")
    client.force_login(user)
    return client


def test_an_extractions_proposals_are_shown_accepted_and_rejected(
    openai_llm, agent_a, agent_a_api, staff_client, set_policy
):
    set_policy(agent_a, max_writes_per_turn=1)
    city = put(agent_a_api, "home_city", "Porto")
    openai_llm.answers = [facts(fact("home_city", "Lisbon"), fact("diet", "vegan <b>strict</b>"))]
    # A price that makes a cost of six decimals: 1,000 tokens in at $104.213 a million, $0.104213.
    with override_settings(LLM_PRICES={"test-model": [104.213, 0.0]}):
        extract(agent_a_api, turnId="t1")  # the upsert above used the 60 s window; this turn allows one write
    record = Extraction.objects.get()

    listed = staff_client.get(reverse("admin:extraction_extraction_changelist") + "?trigger__exact=api")
    assert listed.status_code == 200 and b"agent-a" in listed.content
    # A real run shows no dry-run marker (no red cross), and its cost in full.
    assert _cells(listed.content.decode(), "dry_run_flag") == [""]
    assert _cells(listed.content.decode(), "cost_shown") == ["$0.104213"]
    page = staff_client.get(reverse("admin:extraction_extraction_change", args=[record.pk]))

    html = page.content.decode()
    assert page.status_code == 200
    assert "UPDATE" in html and "Lisbon" in html and "Porto" in html  # the value it replaced
    assert "REJECTED" in html and "maxWritesPerTurn" in html
    assert "&lt;b&gt;strict&lt;/b&gt;" in html  # the model's text is escaped
    assert reverse("admin:usermemory_memoryentry_change", args=[internal_id(city["id"])]) in html
    assert (
        staff_client.post(reverse("admin:extraction_extraction_change", args=[record.pk]), {}).status_code
        == 403
    )
    assert staff_client.get(reverse("admin:extraction_extractionwatermark_changelist")).status_code == 200


def test_the_admin_finds_an_extraction_by_the_public_id_history_shows(
    openai_llm, agent_a, agent_a_api, staff_client
):
    """Issue 44, finding 10 (b): the id a history event's provenance names leads staff to the extraction."""
    city = put(agent_a_api, "home_city", "Porto")
    openai_llm.answers = [facts(fact("home_city", "Lisbon")), facts(fact("diet", "vegan"))]
    extract(agent_a_api, turnId="t1")
    extract(agent_a_api, turnId="t2")
    events = agent_a_api.get(f"/usermemorystore/memories/entry/{city['id']}/history").json()
    shown = events[-1]["provenance"]["extraction"]
    first = Extraction.objects.order_by("pk").first()
    assert first is not None and shown == public_id(first.pk, "extraction")

    listed = staff_client.get(reverse("admin:extraction_extraction_changelist"), {"q": shown})
    found = list(listed.context["cl"].result_list)
    assert [e.pk for e in found] == [first.pk]
    page = staff_client.get(reverse("admin:extraction_extraction_change", args=[first.pk]))
    assert shown in page.content.decode()


def _cells(html: str, column: str) -> list[str]:
    """The text of each cell of one column of the page's tables (an inline's or a list's), tags dropped."""
    found = re.findall(rf'<td class="field-{column}[^"]*">(.*?)</td>', html, flags=re.S)
    return [unescape(re.sub(r"<[^>]+>", "", cell)).strip() for cell in found]


def test_an_extracted_entry_shows_its_provenance_and_its_history_the_trigger(
    openai_llm, agent_a, agent_a_api, admin_api, staff_client, set_policy
):
    """Issue 46, part 4: a background extraction that changed a value says so on the entry's page (trigger,
    extraction, messages, model) and in each history row; the source filter offers ``extracted``."""
    set_policy(agent_a, extract_from_conversations=True)
    city = put(agent_a_api, "home_city", "Porto")
    cid = conversation(admin_api)
    (said,) = say(agent_a_api, cid, "I moved back to Lisbon.")
    openai_llm.answers = [facts(fact("home_city", "Lisbon", sources=[0]))]
    run("agent-a")
    record = Extraction.objects.get()
    entry = MemoryEntry.objects.get(pk=internal_id(city["id"]))
    assert (entry.value, entry.source) == ("Lisbon", "extracted")

    page = staff_client.get(reverse("admin:usermemory_memoryentry_change", args=[entry.pk]))
    html = page.content.decode()
    provenance = re.search(r'<table class="details-table provenance">(.*?)</table>', html, flags=re.S)
    assert provenance is not None, "the entry's page shows no provenance"
    shown = provenance.group(1)
    extraction_url = reverse("admin:extraction_extraction_change", args=[record.pk])
    message_url = reverse("admin:conversations_message_change", args=[said])
    assert "extraction (background)" in shown
    assert f'<a href="{extraction_url}">{public_id(record.pk, "extraction")}</a>' in shown
    assert f'<a href="{message_url}">{said}</a>' in shown
    assert reverse("admin:conversations_conversation_change", args=[cid]) in shown
    assert "test-model" in shown and "agent-a" in shown
    assert city["id"] in html  # the entry's public id, as the API names it
    # The history, oldest first: the agent's write over the API, then the extraction that changed it.
    assert _cells(html, "trigger") == ["API", "extraction (background)"]
    assert _cells(html, "extraction") == ["", public_id(record.pk, "extraction")]
    assert _cells(html, "messages") == ["", said]
    assert _cells(html, "new_value") == ['"Porto"', '"Lisbon"']

    events = staff_client.get(reverse("admin:usermemory_memoryevent_changelist"), {"key": "home_city"})
    assert sorted(_cells(events.content.decode(), "trigger")) == ["API", "extraction (background)"]

    memories = reverse("admin:usermemory_memoryentry_changelist")
    listed = staff_client.get(memories)
    assert b"?source=extracted" in listed.content
    found = staff_client.get(memories, {"source": "extracted"}).context["cl"].result_list
    assert [e.pk for e in found] == [entry.pk]
