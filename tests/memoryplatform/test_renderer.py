"""The REST API's JSON as clients read it, whichever library writes it (memoryplatform.api.renderers):
compact UTF-8, U+2028 and U+2029 escaped, numbers beyond 64 bits exact, pretty-printed on request, and the
error envelope unchanged."""

import json

MEMORIES = "/usermemorystore/memories"
U = "user-render"


def put(client, key, value):
    response = client.put(MEMORIES, {"userId": U, "key": key, "value": value}, format="json")
    assert response.status_code == 201, response.content
    return response


def test_compact_utf8_with_line_separators_escaped(agent_a_api):
    response = put(agent_a_api, "city", "München\u2028next\u2029para")
    body = response.content
    assert "München".encode() in body  # UTF-8, not \u00fc
    assert b"\\u2028" in body and b"\\u2029" in body
    assert "\u2028".encode() not in body and "\u2029".encode() not in body
    assert b'"key":"city"' in body  # no space after separators
    assert response.json()["value"] == "München\u2028next\u2029para"


def test_integers_beyond_64_bits_come_back_exact(agent_a_api):
    big = {"n": 2**70, "m": -(2**65), "list": [2**64]}
    assert put(agent_a_api, "big", big).json()["value"] == big
    listed = agent_a_api.get(f"{MEMORIES}/{U}/key/big")
    assert json.loads(listed.content)["value"] == big


def test_timestamps_as_before(agent_a_api):
    entry = put(agent_a_api, "when", "now").json()
    for field in ("createdAt", "updatedAt", "validFrom"):
        assert entry[field].endswith("Z") and "+" not in entry[field]
    assert entry["lastAccessedAt"] is None


def test_pretty_printed_on_request(agent_a_api):
    put(agent_a_api, "pretty", {"a": 1})
    response = agent_a_api.get(f"{MEMORIES}/{U}/key/pretty", HTTP_ACCEPT="application/json; indent=2")
    assert response.status_code == 200
    assert response.content.startswith(b'{\n  "id": ')
    compact = agent_a_api.get(f"{MEMORIES}/{U}/key/pretty")
    assert b"\n" not in compact.content and compact.json() == response.json()


def test_error_envelope_unchanged(agent_a_api):
    response = agent_a_api.get(f"{MEMORIES}/{U}/key/missing")
    assert response.status_code == 404
    assert set(response.json()) == {"error", "code", "details"}
    assert response["Content-Type"] == "application/json"
