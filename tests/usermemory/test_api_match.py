"""A list's and a search's narrowing (issue 30, for LangGraph's ``search``): ``keyPrefix``, ``visibility``
and ``filter`` on the value's fields, applied by the server before the page is cut, at every search mode."""

import json

import pytest

from tests.helpers import assert_envelope

BASE = "/usermemorystore/memories"
U = "user-match"


@pytest.fixture
def foods(agent_a_api, put, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        put(agent_a_api, userId=U, key="food/pizza", value={"kind": "food", "rating": 5, "name": "pizza"})
        put(agent_a_api, userId=U, key="food/kale", value={"kind": "food", "rating": 2, "name": "kale"})
        put(agent_a_api, userId=U, key="food/soup", value={"kind": "food", "rating": "high", "name": "soup"})
        climb = {"kind": "sport", "rating": 4, "name": "climbing"}
        put(agent_a_api, userId=U, key="sport/climb", value=climb)
        put(agent_a_api, userId=U, key="food/note", value="a plain string about food", visibility="global")


def _keys(response) -> list[str]:
    assert response.status_code == 200, response.content
    return sorted(e["key"] for e in response.json())


def test_key_prefix_visibility_and_filter_narrow_a_list(agent_a_api, viewer_api, foods):
    listed = f"{BASE}/{U}"
    assert _keys(agent_a_api.get(listed, {"keyPrefix": "food/"})) == [
        "food/kale",
        "food/note",
        "food/pizza",
        "food/soup",
    ]
    assert _keys(agent_a_api.get(listed, {"visibility": "global"})) == ["food/note"]
    at_least_4 = {"filter": json.dumps({"rating": {"$gte": 4}})}
    assert _keys(agent_a_api.get(listed, at_least_4)) == ["food/pizza", "sport/climb"]  # "high" is no number
    food_not_kale = {"filter": json.dumps({"kind": "food", "name": {"$ne": "kale"}}), "keyPrefix": "food/"}
    assert _keys(viewer_api.get(listed, food_not_kale)) == ["food/pizza", "food/soup"]  # not the string
    between = {"filter": json.dumps({"rating": {"$gt": 2, "$lt": 5}})}
    assert _keys(agent_a_api.get(listed, between)) == ["sport/climb"]
    # The page is cut after the narrowing: the one match is found whatever the newer entries.
    assert _keys(agent_a_api.get(listed, {"filter": json.dumps({"name": "pizza"}), "limit": 1})) == [
        "food/pizza"
    ]


def test_search_applies_them_in_every_mode(agent_a_api, foods):
    search = f"{BASE}/{U}/search"
    for mode in ("keyword", "hybrid"):
        params = {"q": "food", "mode": mode, "filter": json.dumps({"rating": {"$lte": 2}}), "limit": 1}
        assert _keys(agent_a_api.get(search, params)) == ["food/kale"], mode
    for mode in ("keyword", "semantic", "hybrid"):
        assert "food/note" in _keys(agent_a_api.get(search, {"q": "food", "mode": mode})), mode
        for narrowing in ({"keyPrefix": "sport/"}, {"visibility": "self"}, {"filter": '{"kind": "food"}'}):
            found = _keys(agent_a_api.get(search, {"q": "food", "mode": mode, **narrowing}))
            assert "food/note" not in found, (mode, narrowing)


def test_bad_narrowing_is_a_400(agent_a_api, foods):
    for params in (
        {"filter": "{not json"},
        {"filter": json.dumps([1, 2])},
        {"filter": json.dumps({"rating": {"$near": 3}})},
        {"filter": json.dumps({f"f{i}": i for i in range(21)})},
        {"visibility": "everyone"},
        {"keyPrefix": "a\x00b"},
        {"asOf": "2026-01-01T00:00:00Z", "keyPrefix": "food/"},
    ):
        assert_envelope(agent_a_api.get(f"{BASE}/{U}", params), 400, "bad_request")
    bad = {"q": "x", "filter": json.dumps({"rating": {"$near": 3}})}
    assert_envelope(agent_a_api.get(f"{BASE}/{U}/search", bad), 400, "bad_request")


def test_key_patterns_narrow_a_list_by_segments(agent_a_api, put, foods):
    """``keyPattern`` (LangGraph's namespace wildcards, issue 47): ``*`` one segment, ``**`` any number,
    the whole key; repeated, any of them. Other characters are themselves, regex ones too."""
    put(agent_a_api, userId=U, key="food/italian/pasta", value={"kind": "food"})
    put(agent_a_api, userId=U, key="a.b", value={"kind": "dot"})
    put(agent_a_api, userId=U, key="axb", value={"kind": "x"})
    listed = f"{BASE}/{U}"
    assert _keys(agent_a_api.get(listed, {"keyPattern": "*/pizza"})) == ["food/pizza"]
    assert _keys(agent_a_api.get(listed, {"keyPattern": "food/*"})) == [
        "food/kale",
        "food/note",
        "food/pizza",
        "food/soup",
    ]
    assert _keys(agent_a_api.get(listed, {"keyPattern": "food/**"})) == [
        "food/italian/pasta",
        "food/kale",
        "food/note",
        "food/pizza",
        "food/soup",
    ]
    assert _keys(agent_a_api.get(listed, {"keyPattern": "**/pasta"})) == ["food/italian/pasta"]
    assert _keys(agent_a_api.get(listed, {"keyPattern": ["*/climb", "**/pasta"]})) == [
        "food/italian/pasta",
        "sport/climb",
    ]
    assert _keys(agent_a_api.get(listed, {"keyPattern": "a.b"})) == ["a.b"]  # "." is no regex here
    assert _keys(agent_a_api.get(listed, {"keyPattern": "*", "visibility": "self"})) == ["a.b", "axb"]
    # The page is cut after the narrowing: the newer entries a.b and axb do not take its one place.
    assert _keys(agent_a_api.get(listed, {"keyPattern": "**/pasta", "limit": 1})) == ["food/italian/pasta"]


def test_too_many_key_patterns_is_a_400(agent_a_api):
    too_many = {"keyPattern": [f"k{n}/*" for n in range(33)]}
    assert_envelope(agent_a_api.get(f"{BASE}/{U}", too_many), 400, "bad_request")
    as_of = {"keyPattern": "*", "asOf": "2026-01-01T00:00:00Z"}
    assert_envelope(agent_a_api.get(f"{BASE}/{U}", as_of), 400, "bad_request")
