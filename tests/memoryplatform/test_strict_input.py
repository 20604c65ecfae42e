"""Strict input: an unknown body field is a 400 naming it; a field the API returned is taken back. (Query
strings: test_strict_query.py.)"""

import importlib

import pytest
from rest_framework import serializers

from apikeys.models import Agent
from memoryplatform.api.serializers import StrictInput
from tests.conversations.utils import BASE, create, text
from tests.helpers import assert_envelope
from usermemory.models import MemoryEntry

ENTRIES = "/usermemorystore/memories"


def test_a_misspelt_field_is_a_400_naming_it_and_nothing_is_stored(agent_a_api):
    body = {"userId": "u1", "key": "lang", "value": "German", "visibilty": "global"}
    answer = assert_envelope(agent_a_api.put(ENTRIES, body, format="json"), 400, "bad_request")
    assert answer["error"] == "visibilty: unknown field; did you mean visibility?"
    assert "visibilty" in answer["details"]["fields"]
    assert not MemoryEntry.objects.exists()


def test_an_entry_read_back_is_accepted_and_what_the_api_owns_is_ignored(agent_a_api):
    body = {"userId": "u1", "key": "lang", "value": "German", "visibility": "global"}
    got = agent_a_api.put(ENTRIES, body, format="json").json()
    searched = agent_a_api.get(f"{ENTRIES}/u1/search", {"q": "German", "mode": "hybrid"}).json()[0]
    assert "score" in searched and "accessCount" in searched
    for sent in ({**got, "value": "French", "accessCount": 99}, {**searched, "value": "Dutch"}):
        response = agent_a_api.put(ENTRIES, sent, format="json")
        assert response.status_code == 200, response.content
        assert response.json()["id"] == got["id"]
        assert response.json()["accessCount"] == 0
    assert MemoryEntry.objects.get().value == "Dutch"


def test_a_batch_names_the_item_and_its_unknown_field(agent_a_api):
    entries = [{"userId": "u1", "key": "a", "value": 1}, {"userId": "u1", "key": "b", "value": 2, "ttl": 5}]
    answer = assert_envelope(agent_a_api.put(f"{ENTRIES}/batch", entries, format="json"), 400, "bad_request")
    assert answer["error"] == "entries[1]: ttl: unknown field."
    wrapped = {"entries": entries[:1], "turnid": "t1"}
    answer = assert_envelope(agent_a_api.put(f"{ENTRIES}/batch", wrapped, format="json"), 400, "bad_request")
    assert answer["error"] == "turnid: unknown field; did you mean turnId?"
    assert not MemoryEntry.objects.exists()


def test_an_agent_is_refused_a_name_and_pointed_at_display_name(admin_api):
    answer = assert_envelope(
        admin_api.post("/v1/agents", {"id": "bot", "name": "Bot"}, format="json"), 400, "bad_request"
    )
    assert answer["error"] == "name: unknown field; did you mean displayName?"
    assert not Agent.objects.filter(id="bot").exists()
    created = admin_api.post("/v1/agents", {"id": "bot", "displayName": "Bot"}, format="json")
    assert created.status_code == 201, created.content
    assert created.json()["displayName"] == "Bot"


def test_an_agent_read_back_patches_and_a_nested_typo_is_named(admin_api, agent_a):
    got = admin_api.get(f"/v1/agents/{agent_a.id}").json()
    got["displayName"] = "Renamed"
    got["memoryPolicy"]["maxRecallEntries"] = 7
    response = admin_api.patch(f"/v1/agents/{agent_a.id}", got, format="json")
    assert response.status_code == 200, response.content
    assert (response.json()["displayName"], response.json()["memoryPolicy"]["maxRecallEntries"]) == (
        "Renamed",
        7,
    )

    typo = {"memoryPolicy": {"guardrails": {"maxKeyLenght": 5}}}
    answer = assert_envelope(
        admin_api.patch(f"/v1/agents/{agent_a.id}", typo, format="json"), 400, "bad_request"
    )
    assert answer["error"] == "guardrails: maxKeyLenght: unknown field; did you mean maxKeyLength?"


def test_a_sync_message_on_another_channel_is_a_400(agent_a_api):
    conversation = create(agent_a_api)
    url = f"{BASE}/{conversation}/memory/messages/sync"
    wrong = {"messages": [{"role": "user", "content": text("hi"), "channel": "history"}]}
    answer = assert_envelope(agent_a_api.post(url, wrong, format="json"), 400, "bad_request")
    assert answer["error"] == 'messages: 0: channel: "history" is not a valid choice.'
    memory = {"messages": [{"role": "user", "content": text("hi"), "channel": "memory"}]}
    synced = agent_a_api.post(url, memory, format="json")
    assert synced.status_code == 200, synced.content
    # The memory channel as read, sent back with one more message, appends only that one.
    read = agent_a_api.get(f"{BASE}/{conversation}/messages", {"channel": "memory"}).json()["data"]
    again = {"messages": [*read, {"role": "assistant", "content": text("hello")}]}
    delta = agent_a_api.post(url, again, format="json")
    assert delta.status_code == 200, delta.content
    assert [m["content"][0]["text"] for m in delta.json()["messages"]] == ["hello"]


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/v1/groups", {"id": "g1", "member": ["agent-a"]}, "member"),
        ("/v1/conversations", {"userId": "u1", "titel": "x"}, "titel"),
        ("/v1/tasks", {"title": "t", "asignee": "agent-a"}, "asignee"),
        ("/v1/activity/tool-calls", {"calls": [{"tool": "x", "duration": 5}]}, "duration"),
    ],
)
def test_every_app_refuses_an_unknown_field(admin_api, agent_a_api, path, body, field):
    client = admin_api if path == "/v1/groups" else agent_a_api
    answer = assert_envelope(client.post(path, body, format="json"), 400, "bad_request")
    assert field in answer["error"], answer


def test_the_schema_documents_the_fields_taken_back(admin_api):
    schema = admin_api.get("/api/schema/", {"format": "json"}).json()
    description = schema["components"]["schemas"]["MemoryUpsertInputRequest"]["description"]
    assert "accepted and ignored" in description and "accessCount" in description


INPUT_MODULES = (
    "usermemory.api.serializers",
    "conversations.api.serializers",
    "activity.api.serializers",
    "apikeys.api.serializers",
    "agenttools.api.views",
)


def test_every_input_serializer_is_strict():
    """A new body serializer (named ``...InputSerializer``, as the conventions name them) must refuse unknown
    fields: the shared base does it, so it needs no code of its own."""
    loose = [
        f"{module}.{name}"
        for module in INPUT_MODULES
        for name, value in vars(importlib.import_module(module)).items()
        if name.endswith("InputSerializer")
        and isinstance(value, type)
        and issubclass(value, serializers.Serializer)
        and not issubclass(value, StrictInput)
    ]
    assert loose == []
