"""GET /v1/events: the change feed, oldest first, page by page; a cursor that never skips an event, even one
whose transaction took a lower id and committed later; a bad cursor or type is a 400."""

import threading
from typing import Any

import pytest
from django.db import connection, transaction

from apikeys.caller import Caller
from events import store
from tests.events.conftest import settled
from tests.helpers import assert_envelope
from usermemory.services import MemoryWrite, memory_upsert

pytestmark = pytest.mark.django_db(transaction=True)
U = "u1"


def _page(client: Any, *, settle: bool = True, **query: Any) -> dict[str, Any]:
    """A page of the feed, once every event written so far is readable (``settle``)."""
    if settle:
        settled()
    response = client.get("/v1/events", query)
    assert response.status_code == 200, response.content
    return response.json()


def test_pages_follow_each_other_oldest_first(agent_a_api, put):
    for n in range(5):
        put(agent_a_api, userId=U, key=f"k{n}", value=n)
    first = _page(agent_a_api, limit=2)
    second = _page(agent_a_api, limit=2, after=first["next"])
    third = _page(agent_a_api, limit=2, after=second["next"])
    keys = [e["key"] for page in (first, second, third) for e in page["results"]]
    assert keys == [f"k{n}" for n in range(5)]
    caught_up = _page(agent_a_api, after=third["next"])
    assert caught_up == {"results": [], "next": third["next"]}  # nothing new: the same cursor
    put(agent_a_api, userId=U, key="k5", value=5)
    assert [e["key"] for e in _page(agent_a_api, after=third["next"])["results"]] == ["k5"]


def test_types_filter_the_feed(agent_a_api, put):
    put(agent_a_api, userId=U, key="city", value="Porto")
    put(agent_a_api, userId=U, key="city", value="Lisbon")
    (update,) = _page(agent_a_api, types="memory.updated")["results"]
    assert (update["value"], update["oldValue"]) == ("Lisbon", "Porto")


def test_a_transaction_that_commits_later_is_not_skipped(agent_a, agent_a_api, put):
    """Transaction T1 writes first (the lower event id) and commits last. A reader that had moved past the
    higher id would skip it for ever; this feed holds T2's event back until T1 ends, then gives both."""
    written, release = threading.Event(), threading.Event()

    def slow_writer() -> None:
        try:
            with transaction.atomic():
                write = MemoryWrite(user_id=U, key="slow", value="first written, last committed")
                memory_upsert(caller=Caller(role="agent", agent=agent_a), write=write)
                written.set()
                assert release.wait(timeout=120)
        finally:
            connection.close()

    thread = threading.Thread(target=slow_writer)
    thread.start()
    try:
        assert written.wait(timeout=120)
        put(agent_a_api, userId="u2", key="fast", value="written later, committed first")  # not U: its lock
        held = _page(agent_a_api, settle=False)  # settled() would wait for T1 itself
        assert held["results"] == []  # T1 is open: nothing at or after it is given yet
    finally:
        release.set()
        thread.join()
    after = _page(agent_a_api, after=held["next"])
    assert [e["key"] for e in after["results"]] == ["slow", "fast"]


@pytest.mark.parametrize("cursor", ["garbage", "1.2", "-1", "4503599627370496", "9" * 40])
def test_a_cursor_the_feed_did_not_give_is_a_400(agent_a_api, cursor):
    assert_envelope(agent_a_api.get("/v1/events", {"after": cursor}), 400, "bad_request")


def test_an_unknown_type_or_parameter_is_a_400(agent_a_api, anon_api):
    assert_envelope(agent_a_api.get("/v1/events", {"types": "memory.creatd"}), 400, "bad_request")
    assert_envelope(agent_a_api.get("/v1/events", {"afer": "0"}), 400, "bad_request")
    assert anon_api.get("/v1/events").status_code == 401


def test_a_page_of_events_the_key_may_not_see_still_moves_the_cursor(agent_a_api, agent_b_api, put):
    """An agent that may see none of the newest events is not made to scan them again at every poll: the
    cursor moves past every event the page scanned; an event it may see, written after them, still comes."""
    for n in range(3):
        put(agent_b_api, userId=U, key=f"b{n}", value=n)  # agent B's own: agent A may not see them
    unseen = _page(agent_a_api)
    assert unseen["results"] == [] and unseen["next"] != "0"
    assert _page(agent_a_api, after=unseen["next"]) == {"results": [], "next": unseen["next"]}
    put(agent_b_api, userId=U, key="shared", value="for all", visibility="global")
    assert [e["key"] for e in _page(agent_a_api, after=unseen["next"])["results"]] == ["shared"]


def test_a_page_scans_a_bounded_stretch_and_skips_no_visible_event(
    monkeypatch, agent_a_api, agent_b_api, put
):
    """A page reads at most ``SCAN_ROWS`` events (3 here), seen or not; a full page stops just before the
    next event it would show. Page after page, every event agent A may see comes, once, in order."""
    monkeypatch.setattr(store, "SCAN_ROWS", 3)
    for key in ["b0", "a0", "b1", "a1", "b2", "b3", "b4", "a2"]:
        put(agent_a_api if key[0] == "a" else agent_b_api, userId=U, key=key, value=key)
    pages, cursor = [], "0"
    for _ in range(4):
        page = _page(agent_a_api, after=cursor, limit=1)
        pages.append([e["key"] for e in page["results"]])
        cursor = page["next"]
    assert pages == [["a0"], ["a1"], ["a2"], []]
