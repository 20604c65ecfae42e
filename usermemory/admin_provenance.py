"""Where a memory's value came from, in the admin: the entry's provenance (the event that wrote its value,
or a Dream summary's sources) and the history rows, each with its trigger, extraction, messages and model,
linked to the extraction, conversation, message and Dream run pages. The links are by URL name: the admin of
another app is reached without importing it (extraction and conversations import usermemory)."""

import uuid
from typing import Any

from django.contrib import admin
from django.urls import reverse
from django.utils.formats import localize
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.timezone import localtime

from memoryplatform import publicids
from memoryplatform.admin_mixins import ReadOnlyAdminMixin, dollars
from usermemory.history import Origin, entry_value_event, origin_of
from usermemory.models import MemoryEntry, MemoryEvent

NOTHING = SafeString("")


def _link(url_name: str, pk: Any, text: Any) -> SafeString:
    return format_html('<a href="{}">{}</a>', reverse(url_name, args=[pk]), text)


def entry_link(entry_id: int) -> SafeString:
    """An entry by its public id (the id the API shows), linked to its admin page."""
    return _link(
        "admin:usermemory_memoryentry_change", entry_id, publicids.public_str(publicids.ENTRY, entry_id)
    )


def extraction_cell(origin: Origin) -> SafeString:
    """The extraction by its public id (the one the API's history shows), linked to its admin page."""
    if origin.extraction is None:
        return NOTHING
    shown = publicids.public_str(publicids.EXTRACTION, origin.extraction)
    return _link("admin:extraction_extraction_change", origin.extraction, shown)


def run_cell(origin: Origin) -> SafeString:
    return (
        NOTHING
        if origin.dream_run is None
        else _link("admin:dream_dreamrun_change", origin.dream_run, f"run #{origin.dream_run}")
    )


def _is_uuid(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True


def messages_cell(origin: Origin) -> SafeString:
    """The messages the change cites: stored messages (of a conversation) linked to their admin page, the
    ids a caller gave with messages it sent inline as they are."""
    linked = origin.conversation_id is not None
    cells = [
        _link("admin:conversations_message_change", m, m)
        if linked and _is_uuid(m)
        else format_html("<code>{}</code>", m)
        for m in origin.message_ids
    ]
    return format_html_join(", ", "{}", ((c,) for c in cells))


def conversation_cell(origin: Origin) -> SafeString:
    cid = origin.conversation_id
    if cid is None:
        return NOTHING
    if _is_uuid(cid):
        return _link("admin:conversations_conversation_change", cid, cid)
    return format_html("<code>{}</code>", cid)


def trigger_cell(origin: Origin) -> SafeString:
    return format_html('<span class="trigger" title="{}">{}</span>', origin.by, origin.trigger)


def _rows(rows: list[tuple[str, SafeString | str]]) -> SafeString:
    shown = [(name, value) for name, value in rows if value not in ("", None)]
    body = format_html_join("", "<tr><th>{}</th><td>{}</td></tr>", shown)
    return format_html('<table class="details-table provenance">{}</table>', body)


def origin_table(event: MemoryEvent) -> SafeString:
    """The event that wrote a value, as the entry's page shows it: trigger, who, when, the extraction with
    the conversation and messages it cites, the model."""
    origin = origin_of(event)
    model = origin.model + (f" (prompt {origin.prompt_version})" if origin.prompt_version else "")
    return _rows(
        [
            ("trigger", trigger_cell(origin)),
            ("by", origin.by),
            ("written", format_html("{} ({})", localize(localtime(event.created_at)), event.action)),
            ("extraction", extraction_cell(origin)),
            ("conversation", conversation_cell(origin)),
            ("messages", messages_cell(origin)),
            ("model", model),
            ("confidence", "" if origin.confidence is None else str(origin.confidence)),
            ("Dream run", run_cell(origin)),
            ("import", origin.detail),
        ]
    )


def summary_table(provenance: dict[str, Any]) -> SafeString:
    """A Dream summary's own provenance: its run, the entries it replaced, their agents, model and cost."""
    run = provenance.get("run")
    sources = [s for s in provenance.get("sourceEntries") or [] if isinstance(s, int)]
    cost = provenance.get("cost")
    return _rows(
        [
            ("trigger", "Dream (summary)"),
            (
                "Dream run",
                _link("admin:dream_dreamrun_change", run, f"run #{run}") if isinstance(run, int) else "",
            ),
            ("summarizes", format_html_join(", ", "{}", ((entry_link(s),) for s in sources))),
            ("agents", ", ".join(str(a) for a in provenance.get("agents") or [])),
            ("model", str(provenance.get("model") or "")),
            ("cost", dollars(cost) if isinstance(cost, int | float) else ""),
        ]
    )


def entry_provenance(entry: MemoryEntry) -> SafeString:
    """Where the entry's value came from: a Dream summary's sources, else the event that wrote it."""
    if isinstance(entry.provenance, dict):
        return summary_table(entry.provenance)
    event = entry_value_event(entry_id=entry.pk)
    if event is None:
        return format_html("{}", "no history recorded")
    return origin_table(event)


EVENT_CHANGE_FIELDS = ("action", "actor_type", "actor_id", "key_prefix", "old_value", "new_value")
EVENT_ORIGIN_FIELDS = ("trigger", "extraction", "messages")


class EventOriginColumns:
    """Each history row's trigger, extraction and cited messages (from its provenance)."""

    @admin.display(description="trigger")
    def trigger(self, event: MemoryEvent) -> SafeString:
        return trigger_cell(origin_of(event))

    @admin.display(description="extraction or run")
    def extraction(self, event: MemoryEvent) -> SafeString:
        origin = origin_of(event)
        return extraction_cell(origin) or run_cell(origin)

    @admin.display(description="messages")
    def messages(self, event: MemoryEvent) -> SafeString:
        return messages_cell(origin_of(event))


class MemoryEventInline(EventOriginColumns, ReadOnlyAdminMixin, admin.TabularInline):
    """An entry's history, oldest first: each change with what made it."""

    model = MemoryEvent
    verbose_name_plural = "history"
    fk_name = "entry"
    extra = 0
    can_delete = False
    ordering = ["created_at", "id"]
    readonly_fields = ("created_at", "observed_at", *EVENT_ORIGIN_FIELDS, *EVENT_CHANGE_FIELDS)
    fields = readonly_fields
