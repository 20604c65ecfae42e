"""Extractions in the admin: the list, and one extraction's proposals, accepted and rejected, read-only."""

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from extraction.models import Extraction
from tests.extraction.conftest import fact, facts
from tests.extraction.test_api import extract, put
from tests.helpers import internal_id, public_id


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
    extract(agent_a_api, turnId="t1")  # the upsert above used the 60 s window; this turn allows one write
    record = Extraction.objects.get()

    listed = staff_client.get(reverse("admin:extraction_extraction_changelist") + "?trigger__exact=api")
    assert listed.status_code == 200 and b"agent-a" in listed.content
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
