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


@pytest.mark.parametrize(
    ("value", "q"),
    [
        ("Hauptstraße 5", "STRASSE"),  # ß folds to ss
        ("Hauptstrasse 5", "straße"),
        ("ﬁnance report", "FINANCE"),  # the ﬁ ligature folds to fi
        ("ΟΔΟΣ", "οδος"),  # final sigma
        ("οδός", "ΟΔΌΣ"),
    ],
)
def test_search_folds_case_fully(admin_api, value, q):
    admin_api.put(BASE, {"userId": U, "key": "folded", "value": value, "visibility": "global"}, format="json")
    assert found(admin_api, q) == {"folded"}
    assert found(admin_api, "nothing") == set()


def test_search_folds_keys_and_shows_an_agent_only_what_it_sees(agent_a_api, agent_b_api):
    for client, key in [(agent_a_api, "STRASSE_A"), (agent_b_api, "Straße_B")]:
        response = client.put(BASE, {"userId": U, "key": key, "value": "x"}, format="json")
        assert response.status_code == 201
    assert found(agent_a_api, "strasse") == {"STRASSE_A"}
    assert found(agent_b_api, "strasse") == {"Straße_B"}


def test_admin_search_across_users_matches_words_and_prefixes(seeded, viewer_api):
    def across(q):  # type: ignore[no-untyped-def]
        response = viewer_api.get("/v1/memories/search", {"q": q})
        return response.status_code, {
            e["key"] for e in response.json()
        } if response.status_code == 200 else None

    assert across("zür") == (200, {"json_obj"})  # a word's prefix, in a JSON value
    assert across("hello WORLD") == (200, {"MixedCase"})  # every word, any case
    assert across("hello nothing") == (200, set())
    assert across("'hello' & !|:*") == (200, {"MixedCase"})  # tsquery syntax in the input is no syntax
    assert across("%%% ___")[0] == 400  # no word to search for
