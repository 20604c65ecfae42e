"""The memories admin on a big table, and the conflict service behind the admin's Conflicts page."""

import pytest
from django.db import connection
from django.utils import timezone

from apikeys.caller import Caller
from memoryplatform.paginator import LargeTablePaginator
from tests.factories import AgentFactory, MemoryEntryFactory
from tests.helpers import public_id
from usermemory.models import MemoryEntry, MemoryEvent
from usermemory.services import memory_resolve_conflict

# Past the paginator's count cap three times over: what the changelist's queries depend on (the estimate, the
# capped count) is the same at 30,000 rows as at millions; 200,000 took minutes of the suite to insert.
ROWS = 3 * LargeTablePaginator.COUNT_CAP


def _bulk_rows(count: int) -> None:
    """``count`` global entries across 2,000 users, made in one INSERT .. SELECT."""
    AgentFactory(id="bulk-agent")
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    with connection.cursor() as cursor:
        cursor.execute(
            """
            WITH RECURSIVE seq(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM seq WHERE n < %s)
            INSERT INTO usermemory_memoryentry (user_id, key, value, value_text, category, visibility,
                source_agent_id, group_ids, conflicted, access_count, created_at, updated_at)
            SELECT 'user-' || (n %% 2000), 'key-' || n, to_jsonb('v' || n), 'v' || n, 'fact', 'global',
                   'bulk-agent', '[]',
                   n %% 1000 = 0, 0, %s, %s
            FROM seq
            """,
            [count, now, now],
        )


@pytest.mark.django_db
def test_the_changelist_past_the_count_cap_bounds_its_queries(admin_client, django_assert_max_num_queries):
    _bulk_rows(ROWS)
    assert MemoryEntry.objects.count() == ROWS
    for url in (
        "/admin/usermemory/memoryentry/",
        "/admin/usermemory/memoryentry/?conflicted__exact=1",
        "/admin/usermemory/memoryentry/?visibility__exact=global&stale_days=30",
        "/admin/usermemory/memoryentry/?q=user-7",
        "/admin/usermemory/memoryentry/?category=fact&source_agent__id__exact=bulk-agent",
    ):
        # session, user, paginator count (capped or estimated), one page of rows with their agents, filters
        with django_assert_max_num_queries(8):
            response = admin_client.get(url)
        assert response.status_code == 200, url
    page = admin_client.get("/admin/usermemory/memoryentry/?conflicted__exact=1")
    assert page.context["cl"].result_count == ROWS // 1000
    # The category filter offers the agents' categories without scanning the table for distinct values.
    assert b"?category=preference" in admin_client.get("/admin/usermemory/memoryentry/").content
    assert admin_client.get("/admin/usermemory/memoryentry/?category=context").context["cl"].result_count == 0


@pytest.mark.django_db
@pytest.mark.parametrize("mode", ["update", "delete"])
def test_resolve_conflict_keeps_one_value(mode):
    a, b = AgentFactory(id="agent-x"), AgentFactory(id="agent-y")
    now = timezone.now()
    common = {
        "user_id": "u",
        "key": "language",
        "category": "fact",
        "conflicted": True,
        "created_at": now,
        "updated_at": now,
    }
    keep = MemoryEntry.objects.create(
        value="German", value_text="German", visibility="self", source_agent=a, **common
    )
    other = MemoryEntry.objects.create(
        value="English", value_text="English", visibility="global", source_agent=b, **common
    )
    staff = Caller(role="admin")
    result = memory_resolve_conflict(
        caller=staff, user_id="u", key="language", keep_entry_id=keep.id, mode=mode
    )
    assert result["kept"] == keep.id
    keep.refresh_from_db()
    assert not keep.conflicted
    if mode == "update":
        other.refresh_from_db()
        assert (other.value, other.conflicted) == ("German", False)
    else:
        assert not MemoryEntry.objects.filter(id=other.id).exists()
    events = MemoryEvent.objects.filter(action="resolved").order_by("entry_id")
    assert [(e.entry_id, e.old_value) for e in events] == [(keep.id, "German"), (other.id, "English")]


@pytest.mark.django_db
def test_resolve_conflict_refuses_a_non_admin_and_a_stranger_entry(agent_a):
    from memoryplatform.errors import Forbidden, NotFound

    with pytest.raises(Forbidden):
        memory_resolve_conflict(caller=Caller(role="viewer"), user_id="u", key="k", keep_entry_id=1)
    with pytest.raises(NotFound):
        memory_resolve_conflict(caller=Caller(role="admin"), user_id="u", key="k", keep_entry_id=1)


@pytest.mark.django_db
def test_correct_refuses_an_agent_and_a_viewer_and_checks_the_value_as_every_write():
    from memoryplatform.errors import BadRequest, Forbidden
    from usermemory.services import memory_correct

    entry = MemoryEntryFactory(user_id="u", key="city", value="Berln")
    for role in ("agent", "viewer"):
        with pytest.raises(Forbidden):
            memory_correct(caller=Caller(role=role, agent=entry.source_agent), entry_id=entry.id, value="x")
    with pytest.raises(BadRequest):
        memory_correct(caller=Caller(role="admin"), entry_id=entry.id, value="nul\x00")
    entry.refresh_from_db()
    assert entry.value == "Berln"


@pytest.mark.parametrize(
    "path",
    [
        "/admin/usermemory/memoryentry/?stale_days=abc",
        "/admin/usermemory/memoryentry/?stale_days=99999999999",
        "/admin/usermemory/memoryconflict/?p=%C2%B2",
        f"/admin/usermemory/memoryconflict/?p={2**63}",
    ],
)
def test_hand_typed_admin_parameters_are_not_a_500(admin_client, path):
    assert admin_client.get(path).status_code == 200


@pytest.mark.django_db
def test_memories_changelist_search_is_a_user_id_or_full_text_words(admin_client, agent_a):
    common = {"visibility": "global", "source_agent_id": agent_a.id}
    MemoryEntryFactory(user_id="u-1", key="home_city", value="Zürich, Switzerland", **common)
    MemoryEntryFactory(user_id="u-2", key="favourite_food", value="Rösti", **common)

    def keys(q: str) -> set[str]:
        response = admin_client.get("/admin/usermemory/memoryentry/", {"q": q})
        assert response.status_code == 200
        return {entry.key for entry in response.context["cl"].result_list}

    assert keys("zür") == {"home_city"}  # a word's prefix
    assert keys("SWITZERLAND zurich") == set()  # every word
    assert keys("city") == {"home_city"}  # a word of the key
    assert keys("u-2") == {"favourite_food"}  # a user id, exactly
    assert keys("%%") == set()  # no word: only the user id could match


@pytest.mark.django_db
def test_the_admin_shows_superseded_entries_and_filters_by_validity(admin_client, agent_a):
    common = {"visibility": "global", "source_agent_id": agent_a.id, "user_id": "u-v"}
    summary = MemoryEntryFactory(
        key="summary", value="lives in Berlin", provenance={"writtenBy": "dream"}, **common
    )
    old = MemoryEntryFactory(key="city", value="Berlin", **common)
    MemoryEntry.objects.filter(id=old.id).update(superseded_by=summary, valid_to=timezone.now())

    def keys(**params: str) -> set[str]:
        response = admin_client.get("/admin/usermemory/memoryentry/", params)
        assert response.status_code == 200
        return {entry.key for entry in response.context["cl"].result_list}

    assert keys() == {"summary", "city"}
    assert keys(validity="current") == {"summary"}
    assert keys(validity="superseded") == {"city"}
    page = admin_client.get(f"/admin/usermemory/memoryentry/{old.id}/change/").content.decode()
    assert "Superseded by" in page and "Valid to" in page

    # The summary's page names its run and the entries it replaced, by the ids the API shows.
    MemoryEntry.objects.filter(id=summary.id).update(
        provenance={"writtenBy": "dream", "run": 7, "sourceEntries": [old.id], "model": "m", "cost": 0.0021}
    )
    page = admin_client.get(f"/admin/usermemory/memoryentry/{summary.id}/change/").content.decode()
    shown = page[page.index('class="details-table provenance"') :]
    shown = shown[: shown.index("</table>")]
    assert "Dream (summary)" in shown and '<a href="/admin/dream/dreamrun/7/change/">run #7</a>' in shown
    old_link = f'<a href="/admin/usermemory/memoryentry/{old.id}/change/">{public_id(old.id)}</a>'
    assert old_link in shown and "$0.0021" in shown


@pytest.mark.django_db
def test_the_admin_shows_when_a_value_was_observed_on_the_page_and_in_its_history(admin_client, agent_a_api):
    """Staff see time order (issue 56): the entry's observedAt and each write's, as the write gave them."""
    body = {"userId": "u-obs", "key": "city", "value": "Leeds", "observedAt": "2025-03-04T05:06:07Z"}
    response = agent_a_api.put("/usermemorystore/memories", body, format="json")
    assert response.status_code == 201, response.content
    entry = MemoryEntry.objects.get(user_id="u-obs")

    page = admin_client.get(f"/admin/usermemory/memoryentry/{entry.id}/change/").content.decode()
    at = page.index("js-inline-admin-formset")  # the history inline follows the entry's fields
    history = page[at:]
    assert "Observed at" in page[:at] and "Observed at" in history
    assert page.count("2025-03-04 05:06:07") >= 2 and "2025-03-04 05:06:07" in history
    event = MemoryEvent.objects.get(entry=entry)
    event_page = admin_client.get(f"/admin/usermemory/memoryevent/{event.id}/change/").content.decode()
    assert "Observed at" in event_page and "2025-03-04 05:06:07" in event_page
