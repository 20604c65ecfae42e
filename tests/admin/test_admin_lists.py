"""Every changelist fits a 1366x768 screen: no horizontal scroll, long values cut short with the whole value
on hover, and no red cross where False is nothing wrong."""

import re
from datetime import timedelta
from decimal import Decimal

import pytest
from django.contrib import admin
from django.contrib.auth.models import Group
from django.urls import reverse
from django.utils import timezone

from activity.models import Task, ToolCall
from apikeys.models import ApiKey
from apikeys.services import apikey_create
from dream.models import DreamRun
from extraction.models import Extraction
from tests.factories import AgentFactory, AgentGroupFactory, MemoryEntryFactory, MessageFactory
from usermemory.models import MemoryEvent

pytestmark = pytest.mark.django_db(transaction=True)

LONG = "a rather long value that goes on and on " * 12
LONG_USER = "user-with-a-long-identifier-from-an-external-crm-0000000000000000000000000042"
# The lists that show rows of their own model; the conflicts and GDPR pages are checked beside them.
EXTRA_PAGES = ["admin:usermemory_memoryconflict_changelist", "admin:usermemory_userdatarequest_changelist"]


def _seed_long_rows() -> None:
    """A row in every table, each with the longest values its fields take in practice."""
    now = timezone.now()
    agent = AgentFactory(id="customer-support-agent-for-enterprise-accounts", display_name=LONG[:100])
    other = AgentFactory(id="other-agent")
    AgentGroupFactory(id="helpdesk-and-escalations-team", name=LONG[:100], members=[agent, other])
    Group.objects.create(name="staff-readers")
    apikey_create(role="agent", agent_id=agent.id, label=LONG[:100], expires_at=now + timedelta(days=30))
    for key, value in (("favourite_programming_language_and_framework", LONG), ("city", "Berlin")):
        MemoryEntryFactory(user_id=LONG_USER, key=key, value=value, source_agent=agent, conflicted=False)
    MemoryEntryFactory(user_id=LONG_USER, key="city", value="Hamburg", source_agent=other, conflicted=True)
    MemoryEvent.objects.create(
        user_id=LONG_USER,
        key="favourite_programming_language_and_framework",
        action="updated",
        actor_type="agent",
        actor_id=agent.id,
        old_value=LONG,
        new_value=LONG,
        created_at=now,
    )
    DreamRun.objects.create(
        status="succeeded", started_at=now, finished_at=now, heartbeat_at=now, only_agent=agent.id
    )
    ToolCall.objects.create(
        agent=agent, tool="searchMemoryByMeaningAcrossAllVisibleEntries", created_at=now, task_id="t" * 40
    )
    Task.objects.create(
        creator=agent, assignee=other, title=LONG[:400], user_id=LONG_USER, created_at=now, updated_at=now
    )
    Extraction.objects.create(
        trigger="background",
        agent=agent,
        user_id=LONG_USER,
        status="succeeded",
        facts_added=3,
        facts_rejected=1,
        cost=Decimal("0.104213"),
        model="a-model-with-a-long-name-2025-01-01",
        created_at=now,
    )
    MessageFactory(conversation__user_id=LONG_USER, conversation__title=LONG[:200], session_id="s" * 60)


def _changelists() -> list[str]:
    names = [
        f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist" for model in admin.site._registry
    ]
    return [reverse(name) for name in sorted({*names, *EXTRA_PAGES})]


def _overflow(page) -> dict:  # type: ignore[no-untyped-def]
    """How much wider than its box the page, and the results table's box, are (0: it fits)."""
    return page.evaluate(
        """() => {
            const root = document.documentElement;
            const results = document.querySelector('.results');
            return {
                page: root.scrollWidth - root.clientWidth,
                results: results ? results.scrollWidth - results.clientWidth : 0,
            };
        }"""
    )


# The memories list's columns whose text is long: the user id, the key and the value.
LONG_COLUMNS = ("user_id", "key_shown", "value_preview")


def _visible_characters(page, selector: str) -> list[int]:  # type: ignore[no-untyped-def]
    """For each cell of ``selector`` whose text is 24 characters or more: how many of its first characters
    the browser shows whole, inside the cell and every box that clips them (on one line or wrapped), less
    two for the ellipsis that ends a cut text."""
    return page.evaluate(
        """(selector) => [...document.querySelectorAll(selector)]
            .filter(cell => cell.textContent.trim().length >= 24)
            .map(cell => {
                const clip = (node) => {
                    let box = {left: -Infinity, right: Infinity, top: -Infinity, bottom: Infinity};
                    for (let el = node.parentElement; el; el = el.parentElement) {
                        const style = getComputedStyle(el);
                        if (el === cell || style.overflow !== 'visible') {
                            const r = el.getBoundingClientRect();
                            box = {
                                left: Math.max(box.left, r.left + parseFloat(style.paddingLeft)),
                                right: Math.min(box.right, r.right - parseFloat(style.paddingRight)),
                                top: Math.max(box.top, r.top),
                                bottom: Math.min(box.bottom, r.bottom),
                            };
                        }
                        if (el === cell) return box;
                    }
                    return box;
                };
                const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
                const range = document.createRange();
                let count = 0;
                for (let node = walker.nextNode(); node; node = walker.nextNode()) {
                    const box = clip(node);
                    for (let i = 0; i < node.length; i++) {
                        range.setStart(node, i);
                        range.setEnd(node, i + 1);
                        const glyph = range.getBoundingClientRect();
                        if (glyph.width === 0) continue;  // white space where a line wraps
                        const inside = glyph.left >= box.left - 0.5 && glyph.right <= box.right + 0.5
                            && glyph.top >= box.top - 0.5 && glyph.bottom <= box.bottom + 0.5;
                        if (!inside) return Math.max(0, count - 2);
                        count++;
                    }
                }
                return count;
            })""",
        selector,
    )


def test_every_changelist_fits_1366_without_horizontal_scroll(page):
    _seed_long_rows()
    urls = _changelists()
    assert len(urls) >= 13  # every app's lists, Django's users among them
    too_wide = {}
    for url in urls:
        page.goto(f"{page.base}{url}")
        assert page.locator("#content").is_visible()
        overflow = _overflow(page)
        if overflow["page"] > 0 or overflow["results"] > 0:
            too_wide[url] = overflow
        page.shots(url.strip("/").replace("/", "-"))
    assert too_wide == {}


def test_a_long_value_is_cut_short_with_the_whole_value_on_hover(page):
    _seed_long_rows()
    page.goto(f"{page.base}/admin/usermemory/memoryentry/")
    cell = page.locator("#result_list td.field-value_preview", has_text="a rather long value").first
    assert cell.is_visible()
    shown = cell.inner_text()
    assert len(shown) < len(LONG.strip())
    assert cell.locator("[title]").first.get_attribute("title") == LONG
    # The user id column is cut by the browser; the cell names it whole on hover.
    user_cell = page.locator("#result_list .field-user_id").first
    assert user_cell.get_attribute("title") == LONG_USER

    page.goto(f"{page.base}/admin/activity/task/")
    title = page.locator("#result_list td.field-title").first
    assert title.get_attribute("title") == LONG[:400].strip()
    height = title.bounding_box()["height"]
    assert height < 40, "a title is one line, not one word a line"
    page.shots("tasks")


def test_false_shows_nothing_where_it_is_not_an_error(page):
    _seed_long_rows()
    now = timezone.now()
    DreamRun.objects.create(status="succeeded", dry_run=True, started_at=now, heartbeat_at=now)
    page.goto(f"{page.base}/admin/usermemory/memoryentry/")
    column = page.locator("#result_list td.field-conflict_flag")
    assert column.count() == 3
    assert page.locator("#result_list td.field-conflict_flag img[alt=False]").count() == 0
    assert page.locator("#result_list td.field-conflict_flag img").count() == 0
    assert page.locator("#result_list td.field-conflict_flag", has_text="conflicted").count() == 1
    page.goto(f"{page.base}/admin/dream/dreamrun/")
    assert page.locator("#result_list td.field-dry_run_flag img[alt=False]").count() == 0
    assert page.locator("#result_list td.field-dry_run_flag", has_text="dry run").count() == 1
    assert page.locator("#result_list td.field-dry_run_flag").all_inner_texts() == ["dry run", ""]
    # A real extraction shows no marker at all (not "-"), and its cost whole.
    page.goto(f"{page.base}/admin/extraction/extraction/")
    assert page.locator("#result_list td.field-dry_run_flag").all_inner_texts() == [""]
    cost = page.locator("#result_list td.field-cost_shown").first
    assert cost.inner_text() == "$0.104213"
    assert cost.evaluate("td => td.scrollWidth <= td.clientWidth"), "the cost is cut"
    assert page.locator("#result_list td.field-facts").all_inner_texts() == ["3 added, 1 rejected"]
    assert ApiKey.objects.count() == 1
    page.shots("false-is-blank")


def test_the_memories_list_gives_its_width_to_the_user_key_and_value_at_1366(page):
    """Issue 47: the user id, key and value were cut to 3-5 characters while "Updated at" took 150 px and
    Confidence and Source showed "-"."""
    _seed_long_rows()
    MemoryEntryFactory(user_id="u-2", key="diet", value="vegan", source="extracted", confidence=0.9)
    page.goto(f"{page.base}/admin/usermemory/memoryentry/")
    page.shot("memories-1366")
    width = {
        name: page.locator(f"#result_list thead th.column-{name}").bounding_box()["width"]
        for name in ("user_id", "key_shown", "value_preview", "source_agent", "updated")
    }
    assert min(width["user_id"], width["key_shown"], width["value_preview"]) >= 110, width
    assert width["updated"] <= 140, width
    # At least 24 characters of each long user id, key and value show before the cut: two phone numbers or
    # two user ids that differ after the fifth character read apart.
    shown = {name: _visible_characters(page, f"#result_list .field-{name}") for name in LONG_COLUMNS}
    assert all(shown.values()) and all(count >= 24 for counts in shown.values() for count in counts), shown
    assert page.evaluate("() => document.documentElement.scrollWidth <= document.documentElement.clientWidth")
    cut = page.evaluate(
        """() => [...document.querySelectorAll('#result_list td.field-updated, td.field-insight')]
            .filter(td => td.scrollWidth > td.clientWidth).map(td => td.textContent)"""
    )
    assert cut == []  # the time and "extracted · 0.9" whole
    assert _overflow(page) == {"page": 0, "results": 0}
    insight = page.locator("#result_list td.field-insight").all_inner_texts()
    assert sorted(t.strip() for t in insight) == ["", "", "", "extracted · 0.9"]  # unsaid: blank, not "-"
    updated = page.locator("#result_list td.field-updated").first.inner_text().strip()
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d", updated), updated
