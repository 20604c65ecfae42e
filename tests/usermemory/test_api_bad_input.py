"""Bad input: a 4xx in the envelope, and nothing written."""

import pytest

from tests.helpers import assert_envelope
from usermemory.models import MemoryEntry, MemoryEvent

BASE = "/usermemorystore/memories"


@pytest.fixture(autouse=True)
def nothing_written(db):
    yield
    assert MemoryEntry.objects.filter(user_id="u").count() == 0
    assert MemoryEvent.objects.filter(user_id="u").count() == 0


def test_body_not_json(agent_a_api):
    body = assert_envelope(
        agent_a_api.put(BASE, data="{not json", content_type="application/json"), 400, "bad_request"
    )
    assert "JSON" in body["error"]


def test_body_not_an_object(agent_a_api):
    assert_envelope(agent_a_api.put(BASE, ["userId", "u"], format="json"), 400, "bad_request")


def test_wrong_content_type(agent_a_api):
    assert_envelope(
        agent_a_api.put(BASE, data="userId=u", content_type="application/x-www-form-urlencoded"),
        415,
        "unsupported_media_type",
    )


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"key": "k", "value": 1}, "userId"),
        ({"userId": "u", "value": 1}, "key"),
        ({"userId": "u", "key": "k"}, "value"),
        ({"userId": 5, "key": "k", "value": 1}, "userId"),
        ({"userId": "u", "key": ["k"], "value": 1}, "key"),
        ({"userId": "u", "key": "", "value": 1}, "key"),
        ({"userId": "u", "key": "k", "value": 1, "visibility": "everyone"}, "visibility"),
        ({"userId": "u", "key": "k", "value": 1, "groupIds": "team"}, "groupIds"),
        ({"userId": "u", "key": "k", "value": 1, "category": 3}, "category"),
        ({"userId": "u", "key": "k" * 256, "value": 1}, "key"),
    ],
)
def test_wrong_fields_name_the_field(agent_a_api, body, field):
    response = assert_envelope(agent_a_api.put(BASE, body, format="json"), 400, "bad_request")
    assert response["error"].startswith(f"{field}:"), response
    assert field in response["details"]["fields"]


def test_oversize_value_is_refused_by_the_guardrail(agent_a_api):
    body = assert_envelope(
        agent_a_api.put(BASE, {"userId": "u", "key": "k", "value": "v" * 1001}, format="json"),
        400,
        "bad_request",
    )
    assert "maxValueLength" in body["error"]


@pytest.mark.parametrize("size", [1024 * 1024, 3 * 1024 * 1024])
def test_bodies_of_a_megabyte_and_more(agent_a_api, size):
    data = '{"userId": "u", "key": "k", "value": "' + "v" * size + '"}'
    assert_envelope(
        agent_a_api.put(BASE, data=data, content_type="application/json"), 413, "payload_too_large"
    )


def test_unicode_keys_are_accepted(agent_a_api):
    key = "lieblingsfarbe_🎨_日本語"
    created = agent_a_api.put(BASE, {"userId": "unicode-user", "key": key, "value": "blau"}, format="json")
    assert created.status_code == 201, created.content
    assert agent_a_api.get(f"{BASE}/unicode-user/key/{key}").json()["value"] == "blau"


def test_ignored_fields_are_ignored(agent_a_api):
    created = agent_a_api.put(
        BASE,
        {
            "userId": "ignored",
            "key": "k",
            "value": 1,
            "id": "999",
            "accessCount": 50,
            "createdAt": "2000-01-01T00:00:00Z",
        },
        format="json",
    ).json()
    assert (
        created["id"] != "999" and created["accessCount"] == 0 and not created["createdAt"].startswith("2000")
    )


def test_bad_query_parameters(agent_a_api):
    assert_envelope(agent_a_api.get(f"{BASE}/u/visible?limit=0"), 400, "bad_request")
    assert_envelope(agent_a_api.get(f"{BASE}/u/visible?limit=abc"), 400, "bad_request")
    assert_envelope(agent_a_api.get(f"{BASE}/u/visible?order=random"), 400, "bad_request")
    assert_envelope(agent_a_api.get(f"{BASE}/u?offset=-1"), 400, "bad_request")
    assert_envelope(agent_a_api.get(f"{BASE}/entry/abc/history"), 404, "not_found")


@pytest.mark.parametrize("blank", ["", "   ", "\u200b", "\u200b\u200c", "\ufeff \u2060", "\u3164"])
@pytest.mark.parametrize("field", ["key", "userId"])
def test_a_key_or_user_that_shows_nothing_is_blank_at_every_door(agent_a_api, blank, field):
    """Zero-width and other invisible characters are as blank as white space (issue 44, finding 17), at REST
    and at the LLM tools alike (a tool error the LLM reads): the service refuses them, so no door stores
    them."""
    body = {"userId": "user-blank", "key": "pet", "value": "a cat", field: blank}
    response = agent_a_api.put("/usermemorystore/memories", body, format="json")
    assert response.status_code == 400, response.content
    user_id = body["userId"] if field == "key" else "user-blank"
    if field == "key":
        tool = agent_a_api.post(
            "/v1/tools/rememberFact/invoke",
            {"userId": user_id, "arguments": {"key": blank, "value": "a cat"}},
            format="json",
        )
        assert tool.status_code == 200 and tool.json()["result"].startswith("\u274c"), tool.content
    listed = agent_a_api.get("/usermemorystore/memories/user-blank")
    assert listed.status_code == 200 and listed.json() == []
