"""Formation you can trust (issue 46) through the doors, against the scripted LLM: a newer value is kept
against an older message (SKIPPED, with both times) whichever way the older message comes (the REST door,
the background run, after an import or a staff correction); a message this agent extracted, by any door, is
not extracted again; and a conversation's stored messages are extracted by its id alone."""

import json
from datetime import UTC, datetime, timedelta
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.urls import reverse

from extraction.models import ExtractedMessage, Extraction, ExtractionWatermark
from tests.extraction.conftest import fact, facts
from tests.helpers import assert_envelope, internal_id
from usermemory.models import MemoryEntry

BASE = "/usermemorystore/memories"
CONV = "/v1/conversations"
U = "u-formation"


def conversation(admin_api: Any) -> str:
    response = admin_api.post(CONV, {"userId": U}, format="json")
    assert response.status_code == 201, response.content
    return response.json()["id"]


def say(client: Any, cid: str, text: str, *, role: str = "user") -> dict[str, Any]:
    """Store one message (a request of its own: its own time); its JSON."""
    body = {"messages": [{"role": role, "content": [{"type": "text", "text": text}]}]}
    response = client.post(f"{CONV}/{cid}/messages", body, format="json")
    assert response.status_code == 201, response.content
    return response.json()["data"][0]


def extract(client: Any, **body: Any) -> Any:
    return client.post(f"{BASE}/{U}/extract", body, format="json")


def stored_time(message: dict[str, Any]) -> str:
    """A message's time as the answers write one (ISO 8601, UTC, Z)."""
    return message["createdAt"].replace("+00:00", "Z")


def background(agent: str = "agent-a") -> dict[str, Any]:
    out = StringIO()
    call_command("extract_conversations", "--agent", agent, stdout=out)
    return json.loads(out.getvalue())["agents"][agent]


def prompts(llm: Any) -> list[str]:
    return [r["messages"][-1]["content"] for r in llm.requests]


def entry(key: str) -> MemoryEntry:
    return MemoryEntry.objects.get(user_id=U, key=key)


def only_op(response: Any) -> dict[str, Any]:
    assert response.status_code == 200, response.content
    (op,) = response.json()["operations"]
    return op


# --- Time order at every door ------------------------------------------------------------------------------


def test_the_rest_door_keeps_a_newer_value_against_an_older_message(
    openai_llm, agent_a, agent_a_api, admin_api
):
    cid = conversation(admin_api)
    lisbon = say(agent_a_api, cid, "I live in Lisbon.")
    porto = say(agent_a_api, cid, "I moved to Porto.")
    openai_llm.when = {
        "moved to Porto": facts(fact("home_city", "Porto")),
        "live in Lisbon": facts(fact("home_city", "Lisbon")),
    }
    newer = only_op(extract(agent_a_api, conversationId=cid, messageIds=[porto["id"]]))
    assert (newer["op"], newer["observedAt"]) == ("ADD", stored_time(porto))

    older = extract(agent_a_api, conversationId=cid, messageIds=[lisbon["id"]])

    op = only_op(older)
    assert op["op"] == "SKIPPED" and op["entryId"] == newer["entryId"]
    assert (op["observedAt"], op["storedObservedAt"]) == (stored_time(lisbon), stored_time(porto))
    assert "observed" in op["reason"] and older.json()["skipped"] == 1
    assert entry("home_city").value == "Porto"
    record = Extraction.objects.order_by("-id").first()
    assert record is not None and record.facts_skipped == 1
    assert record.proposals[0]["op"] == "SKIPPED" and record.proposals[0]["storedObservedAt"] == stored_time(
        porto
    )


def test_the_background_keeps_a_value_written_after_the_message(
    openai_llm, agent_a, agent_a_api, admin_api, set_policy
):
    cid = conversation(admin_api)
    lisbon = say(agent_a_api, cid, "I live in Lisbon.")
    written = agent_a_api.put(BASE, {"userId": U, "key": "home_city", "value": "Porto"}, format="json").json()
    set_policy(agent_a, extract_from_conversations=True)
    openai_llm.answers = [facts(fact("home_city", "Lisbon"), fact("language", "German"))]

    totals = background()

    assert (totals["skipped"], totals["added"], totals["updated"]) == (1, 1, 0)
    assert entry("home_city").value == "Porto" and entry("language").value == "German"
    skipped = Extraction.objects.get(trigger="background").proposals[0]
    assert skipped["op"] == "SKIPPED" and skipped["observedAt"] == stored_time(lisbon)
    assert skipped["storedObservedAt"] == written["observedAt"]


def test_an_import_newer_than_the_message_is_kept(
    openai_llm, tmp_path: Path, agent_a, agent_a_api, admin_api
):
    cid = conversation(admin_api)
    lisbon = say(agent_a_api, cid, "I live in Lisbon.")
    later = (datetime.fromisoformat(lisbon["createdAt"]) + timedelta(milliseconds=1)).astimezone(UTC)
    line = {"userId": U, "key": "home_city", "value": "Porto", "observedAt": later.isoformat()}
    (tmp_path / "lines.jsonl").write_text(json.dumps({**line, "sourceAgentId": "agent-a"}) + "\n")
    call_command("import", str(tmp_path / "lines.jsonl"), "--no-progress", stdout=StringIO())
    openai_llm.answers = [facts(fact("home_city", "Lisbon"))]

    op = only_op(extract(agent_a_api, conversationId=cid))

    assert op["op"] == "SKIPPED" and op["storedObservedAt"] == later.isoformat().replace("+00:00", "Z")
    assert entry("home_city").value == "Porto"


def test_a_staff_correction_is_not_reverted_by_an_older_message(
    openai_llm, agent_a, agent_a_api, admin_api, admin_user, client
):
    cid = conversation(admin_api)
    lisbon = say(agent_a_api, cid, "I live in Lisbon.")
    old = say(agent_a_api, cid, "My city? Lisbon, as I said.")
    openai_llm.answers = [facts(fact("home_city", "Lisbon"))]
    added = only_op(extract(agent_a_api, conversationId=cid, messageIds=[lisbon["id"]]))
    client.force_login(admin_user)  # staff correct it in the admin's form
    page = client.post(
        reverse("admin:usermemory_memoryentry_correct", args=[internal_id(added["entryId"])]),
        {"value": "Porto"},
    )
    assert page.status_code == 302

    op = only_op(extract(agent_a_api, conversationId=cid, messageIds=[old["id"]]))

    assert op["op"] == "SKIPPED" and op["observedAt"] == stored_time(old)
    assert entry("home_city").value == "Porto"
    assert op["storedObservedAt"] > op["observedAt"]  # the correction's time, after the message


def test_a_dry_run_shows_what_time_order_would_do(openai_llm, agent_a, agent_a_api, admin_api):
    cid = conversation(admin_api)
    lisbon = say(agent_a_api, cid, "I live in Lisbon.")
    agent_a_api.put(BASE, {"userId": U, "key": "home_city", "value": "Porto"}, format="json")
    openai_llm.answers = [facts(fact("home_city", "Lisbon"))]
    op = only_op(extract(agent_a_api, conversationId=cid, dryRun=True))
    assert op["op"] == "SKIPPED" and op["observedAt"] == stored_time(lisbon)
    assert not ExtractedMessage.objects.exists() and not ExtractionWatermark.objects.filter(last_seq__gt=0)


# --- No re-extraction -------------------------------------------------------------------------------------


def test_the_background_never_rereads_what_the_rest_door_extracted(
    openai_llm, agent_a, agent_a_api, admin_api, set_policy
):
    """The finding: a conversation extracted at the door, a later message moving home_city, then background
    extraction turned on. Its first run reads nothing again."""
    cid = conversation(admin_api)
    first = [say(agent_a_api, cid, "I live in Lisbon."), say(agent_a_api, cid, "I speak German.")]
    openai_llm.answers = [
        facts(fact("home_city", "Lisbon", sources=[0]), fact("language", "German", sources=[1]))
    ]
    ids = [m["id"] for m in first]
    sent = [
        {"role": "user", "content": t, "id": i}
        for t, i in zip(("I live in Lisbon.", "I speak German."), ids, strict=True)
    ]
    assert extract(agent_a_api, conversationId=cid, messages=sent).json()["added"] == 2
    say(agent_a_api, cid, "I moved to Porto.")
    openai_llm.answers = [facts(fact("home_city", "Porto"))]
    assert only_op(extract(agent_a_api, conversationId=cid))["op"] == "UPDATE"
    set_policy(agent_a, extract_from_conversations=True)
    openai_llm.answers = [facts(fact("home_city", "Lisbon", sources=[0]), fact("language", "Portuguese"))]

    totals = background()

    assert totals["extractions"] == 0 and len(openai_llm.requests) == 2  # no call: nothing left to read
    assert (entry("home_city").value, entry("language").value) == ("Porto", "German")
    say(agent_a_api, cid, "I started learning Portuguese.")
    background()
    assert len(openai_llm.requests) == 3 and "I live in Lisbon." not in prompts(openai_llm)[2]
    assert "learning Portuguese" in prompts(openai_llm)[2]


def test_a_message_extracted_past_a_gap_is_left_out_by_the_background(
    openai_llm, agent_a, agent_a_api, admin_api, set_policy
):
    """The door extracts the second message only: the watermark cannot move past the first, so the second is
    recorded; the background reads the first alone, and its watermark then passes both."""
    cid = conversation(admin_api)
    one = say(agent_a_api, cid, "I live in Lisbon.")
    two = say(agent_a_api, cid, "I have a dog called Rex.")
    openai_llm.answers = [facts(fact("dog", "Rex"))]
    only_op(extract(agent_a_api, conversationId=cid, messageIds=[two["id"]]))
    watermark = ExtractionWatermark.objects.get(agent_id="agent-a")
    assert watermark.last_seq == 0 and ExtractedMessage.objects.count() == 1
    set_policy(agent_a, extract_from_conversations=True)
    openai_llm.answers = [facts(fact("home_city", "Lisbon"))]

    assert background()["added"] == 1

    assert "I live in Lisbon." in prompts(openai_llm)[1] and "called Rex" not in prompts(openai_llm)[1]
    watermark.refresh_from_db()
    assert watermark.last_seq == 2 and not ExtractedMessage.objects.exists()  # past both: the record goes
    again = extract(agent_a_api, conversationId=cid, messageIds=[one["id"], two["id"]])
    assert again.json()["alreadyExtracted"] == [one["id"], two["id"]] and len(openai_llm.requests) == 2


def test_the_door_reads_nothing_the_background_extracted(
    openai_llm, agent_a, agent_a_api, admin_api, set_policy
):
    cid = conversation(admin_api)
    say(agent_a_api, cid, "I live in Lisbon.")
    set_policy(agent_a, extract_from_conversations=True)
    openai_llm.answers = [facts(fact("home_city", "Lisbon"))]
    background()
    nothing = extract(agent_a_api, conversationId=cid)
    assert (
        nothing.status_code == 200 and nothing.json()["operations"] == [] and nothing.json()["messages"] == 0
    )
    assert len(openai_llm.requests) == 1


def test_a_claim_of_a_message_covered_meanwhile_writes_nothing(agent_a, admin_api, agent_a_api):
    """The rule behind the door's 409: the background (or another call) extracted a message while the door's
    model answered; the door's writes are refused, with the claim."""
    from extraction.stored import claim
    from memoryplatform.errors import Conflict

    cid = conversation(admin_api)
    say(agent_a_api, cid, "I live in Lisbon.")
    claim(conversation_id=cid, agent_id="agent-a", positions=[1])
    assert ExtractionWatermark.objects.get(agent_id="agent-a").last_seq == 1
    with pytest.raises(Conflict):
        claim(conversation_id=cid, agent_id="agent-a", positions=[1])


# --- Extract from what is stored ----------------------------------------------------------------------------


def test_extract_by_conversation_id_alone_reads_what_the_agent_may_read(
    openai_llm, agent_a, agent_b, agent_a_api, agent_b_api, admin_api
):
    cid = conversation(admin_api)
    say(agent_a_api, cid, "I live in Lisbon.")
    say(agent_b_api, cid, "Agent b's own reply.", role="assistant")  # not in agent-a's view of the history
    say(agent_a_api, cid, "I'm vegetarian.")
    openai_llm.answers = [
        facts(fact("home_city", "Lisbon", sources=[0]), fact("diet", "vegetarian", sources=[1]))
    ]

    response = extract(agent_a_api, conversationId=cid)

    assert response.status_code == 200, response.content
    assert response.json()["messages"] == 2 and response.json()["added"] == 2
    prompt = prompts(openai_llm)[0]
    assert "I live in Lisbon." in prompt and "vegetarian" in prompt and "Agent b's own reply" not in prompt
    provenance = entry("diet").events.get().provenance
    assert provenance["conversationId"] == cid and len(provenance["messageIds"]) == 1


def test_extract_after_a_message_and_of_named_messages(openai_llm, agent_a, agent_a_api, admin_api):
    cid = conversation(admin_api)
    first = say(agent_a_api, cid, "I live in Lisbon.")
    second = say(agent_a_api, cid, "I have a dog.")
    third = say(agent_a_api, cid, "I'm vegetarian.")
    openai_llm.answers = [facts(fact("diet", "vegetarian", sources=[1]))]

    after = extract(agent_a_api, conversationId=cid, afterMessageId=first["id"])

    assert after.status_code == 200 and after.json()["messages"] == 2
    assert "I live in Lisbon." not in prompts(openai_llm)[0] and "I have a dog." in prompts(openai_llm)[0]
    openai_llm.answers = [facts(fact("home_city", "Lisbon"))]
    named = extract(agent_a_api, conversationId=cid, messageIds=[third["id"], first["id"]])
    assert named.json()["alreadyExtracted"] == [third["id"]] and named.json()["messages"] == 1
    assert "I'm vegetarian." not in prompts(openai_llm)[1]
    assert second["id"] not in json.dumps(named.json())


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({}, "messages: required"),
        ({"afterMessageId": "x"}, "messages: required"),
        ({"conversationId": "{cid}", "afterMessageId": "{mid}", "messageIds": ["{mid}"]}, "not both"),
        (
            {
                "conversationId": "{cid}",
                "messages": [{"role": "user", "content": "hi"}],
                "messageIds": ["{mid}"],
            },
            "Send messages, or",
        ),
        (
            {"conversationId": "{cid}", "messageIds": ["00000000-0000-0000-0000-000000000000"]},
            "messageIds[0]: no such message",
        ),
        ({"conversationId": "{cid}", "afterMessageId": "nope"}, "afterMessageId: no such message"),
    ],
)
def test_bad_ways_to_name_the_messages_are_refused_before_any_call(
    openai_llm, agent_a, agent_a_api, admin_api, body, says
):
    cid = conversation(admin_api)
    mid = say(agent_a_api, cid, "I live in Lisbon.")["id"]
    filled = json.loads(json.dumps(body).replace("{cid}", cid).replace("{mid}", mid))
    assert says in assert_envelope(extract(agent_a_api, **filled), 400, "bad_request")["error"]
    assert openai_llm.requests == []


def test_messages_without_text_are_passed_without_a_call(openai_llm, agent_a, agent_a_api, admin_api):
    cid = conversation(admin_api)
    body = {
        "messages": [{"role": "user", "content": [{"type": "image", "url": "https://example.com/a.png"}]}]
    }
    assert agent_a_api.post(f"{CONV}/{cid}/messages", body, format="json").status_code == 201
    nothing = extract(agent_a_api, conversationId=cid)
    assert nothing.status_code == 200 and nothing.json()["messages"] == 0 and openai_llm.requests == []
    assert ExtractionWatermark.objects.get(agent_id="agent-a").last_seq == 1  # read: never read again
    say(agent_a_api, cid, "I live in Lisbon.")
    openai_llm.answers = [facts(fact("home_city", "Lisbon"))]
    assert only_op(extract(agent_a_api, conversationId=cid))["op"] == "ADD"
    assert ExtractionWatermark.objects.get(agent_id="agent-a").last_seq == 2


def test_a_numbered_key_is_never_another_numbered_key_by_meaning():
    """Extraction matches a fact's key to a stored one by meaning as Dream does (usermemory.keynames): the
    embedder finds ``memories/1`` and ``memories/2`` as close as ``city`` and ``home_city``, yet they name two
    facts ("I love pizza", "I am a plumber"); an UPDATE of one by the other's fact would lose it."""
    from extraction.decide import KeyMeaning

    keys = {"memories/1", "memories/2", "phone_1", "phone_2", "city", "home_city"}
    meaning = KeyMeaning(keys, threshold=0.9)
    assert meaning.similarity("memories/1", "memories/2") == 0.0
    assert meaning.similarity("phone_1", "phone_2") == 0.0
    assert meaning.similarity("city", "home_city") > 0.9
