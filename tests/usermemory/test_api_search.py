"""Search is a literal, case-insensitive substring match on the key or the value's text."""

import pytest

BASE = "/usermemorystore/memories"
U = "user-s"

ENTRIES = {
    "discount": "100% off",
    "percent_sign": "fifty per cent",
    "under_score": "snake",
    "underscore_free": "camelCase",
    "quote": 'she said "hi"',
    "MixedCase": "Hello World",
    "json_obj": {"city": "Zürich", "zip": 8001},
    "json_list": ["alpha", "beta"],
    "plain": "nothing to see",
}


@pytest.fixture
def seeded(admin_api):
    for key, value in ENTRIES.items():
        response = admin_api.put(
            BASE, {"userId": U, "key": key, "value": value, "visibility": "global"}, format="json"
        )
        assert response.status_code == 201
    admin_api.put(
        BASE,
        {"userId": "other-user", "key": "discount", "value": "100% off", "visibility": "global"},
        format="json",
    )
    return admin_api


def found(client, q, **params):
    response = client.get(f"{BASE}/{U}/search", {"q": q, **params})
    assert response.status_code == 200, response.content
    return {e["key"] for e in response.json()}


@pytest.mark.parametrize(
    ("q", "keys"),
    [
        ("%", {"discount"}),
        ("_", {"percent_sign", "under_score", "underscore_free", "json_obj", "json_list"}),
        ("r_s", {"under_score"}),
        ('"hi"', {"quote"}),
        ("mixedcase", {"MixedCase"}),
        ("HELLO world", {"MixedCase"}),
        ("zürich", {"json_obj"}),
        ("8001", {"json_obj"}),
        ("beta", {"json_list"}),
        ("%off", set()),
        ("nothing-here", set()),
    ],
)
def test_literal_search(seeded, q, keys):
    assert found(seeded, q) == keys


def test_string_values_match_their_content_not_json_quotes(seeded):
    # The stored text of "snake" is snake, not "snake": a quote does not match it.
    assert found(seeded, '"snake') == set()
    assert found(seeded, "snake") == {"under_score"}


def test_search_is_newest_first_and_category_is_exact(admin_api):
    for key, category in [("a1", "fact"), ("a2", "facts"), ("a3", "fact")]:
        admin_api.put(
            BASE,
            {"userId": U, "key": key, "value": "apple", "category": category, "visibility": "global"},
            format="json",
        )
    assert [e["key"] for e in admin_api.get(f"{BASE}/{U}/search", {"q": "apple"}).json()] == [
        "a3",
        "a2",
        "a1",
    ]
    assert [
        e["key"] for e in admin_api.get(f"{BASE}/{U}/search", {"q": "apple", "category": "fact"}).json()
    ] == ["a3", "a1"]


def test_search_needs_q(admin_api):
    assert admin_api.get(f"{BASE}/{U}/search").status_code == 400


def test_admin_search_across_users(seeded, agent_a_api, viewer_api):
    body = viewer_api.get("/v1/memories/search", {"q": "100%"}).json()
    assert sorted(e["userId"] for e in body) == ["other-user", U]
    assert agent_a_api.get("/v1/memories/search", {"q": "x"}).status_code == 403
