"""Ready to distribute by user (issue 31), read from the models (``django.apps``).

Citus distributes a table by one column and demands that column in every unique key, the primary key
included; a query that names one user stays on one shard when the index it walks leads with that column.
A user-scoped table is one with a ``user_id`` column of its own (the memory user, not a foreign key to
Django's staff users). For each:

- every unique key (unique field, UniqueConstraint) holds ``user_id``;
- every index leads with ``user_id``, or is one of :data:`CROSS_USER_INDEXES`, the access paths that are
  across users by design, each with its reason;
- the primary key is the table's bigint ``id`` (:data:`ID_PRIMARY_KEYS`): what Citus would need instead,
  ``(user_id, id)``, is not done.

Both lists are stated in docs/scaling.md, and this test keeps them exact: a new index that does not lead
with ``user_id``, or a listed one that does not exist any more, fails it.
"""

from pathlib import Path

from django.apps import apps
from django.conf import settings
from django.db import models
from django.db.models.expressions import F

DOCS = Path(settings.BASE_DIR) / "docs" / "scaling.md"
USER = "user_id"

# (table, index name or, for an index Django makes for a field, the field's column): why it is across users.
CROSS_USER_INDEXES = {
    ("usermemory_memoryentry", "memory_agent_user_idx"): "an agent's entries: eviction, Dream's agent passes",
    ("usermemory_memoryentry", "memory_key_user_idx"): "staff lookups of a key across users",
    ("usermemory_memoryentry", "memory_fulltext_idx"): "staff full-text search across users",
    ("usermemory_memoryentry", "superseded_by_id"): "the superseding entry's foreign key",
    ("usermemory_memoryevent", "memory_event_entry_idx"): "an entry's history (the entry names its user)",
    ("usermemory_memoryevent", "created_at"): "the history's retention sweep",
    ("usermemory_turnwritecount", "turn_write_window_idx"): "the turn counters' window sweep",
    ("conversations_conversation", "group_id"): "a group's conversations",
    ("extraction_extraction", "agent_id"): "the agent's foreign key",
    ("extraction_extraction", "extraction_agent_idx"): "an agent's extraction runs",
    ("activity_task", "memory_entry_id"): "the task's memory entry foreign key",
    ("activity_task", "task_assignee_idx"): "an agent's task inbox",
    ("activity_task", "task_creator_idx"): "the tasks an agent created",
    ("activity_task", "task_status_idx"): "staff task lists",
    (
        "events_event",
        "events_event_feed_idx",
    ): "the change feed and the webhooks, in commit order across users",
    ("events_event", "events_event_occurred_idx"): "the events' retention, oldest first across users",
}
# Tables whose primary key is a bigint id alone (Citus would need (user_id, id)).
ID_PRIMARY_KEYS = {
    "usermemory_memoryentry",
    "usermemory_conflictdismissal",
    "usermemory_memoryentrygroup",
    "usermemory_memoryevent",
    "usermemory_turnwritecount",
    "conversations_conversation",
    "extraction_extraction",
    "activity_task",
    "events_event",
}


def _user_scoped() -> list[type[models.Model]]:
    return [
        model
        for model in apps.get_models()
        if not model._meta.proxy
        and any(f.column == USER and not f.is_relation for f in model._meta.local_concrete_fields)
    ]


def _column(model: type[models.Model], name: str) -> str:
    return model._meta.get_field(name.lstrip("-")).column  # type: ignore[union-attr]


def _columns(model: type[models.Model], fields: tuple[str, ...], expressions: tuple) -> list[str]:
    """The key's or index's columns in order; an expression that is not a plain column counts as '<expr>'."""
    if fields:
        return [_column(model, name) for name in fields]
    return [_column(model, e.name) if isinstance(e, F) else "<expr>" for e in expressions]


def _unique_keys(model: type[models.Model]) -> dict[str, list[str]]:
    keys = {f.column: [f.column] for f in model._meta.local_concrete_fields if f.unique and not f.primary_key}
    for constraint in model._meta.constraints:
        if isinstance(constraint, models.UniqueConstraint):
            keys[constraint.name] = _columns(model, tuple(constraint.fields), tuple(constraint.expressions))
    for fields in model._meta.unique_together:
        keys["+".join(fields)] = [_column(model, name) for name in fields]
    return keys


def _indexes(model: type[models.Model]) -> dict[str, list[str]]:
    found = {
        f.column: [f.column]
        for f in model._meta.local_concrete_fields
        if f.db_index and not f.unique and not f.primary_key
    }
    for index in model._meta.indexes:
        found[str(index.name)] = _columns(model, tuple(index.fields), tuple(index.expressions))
    return found


def test_there_are_user_scoped_tables():
    tables = {model._meta.db_table for model in _user_scoped()}
    assert {"usermemory_memoryentry", "usermemory_memoryevent", "conversations_conversation"} <= tables


def test_every_unique_key_of_a_user_scoped_table_holds_user_id():
    missing = [
        (model._meta.db_table, name, columns)
        for model in _user_scoped()
        for name, columns in _unique_keys(model).items()
        if USER not in columns
    ]
    assert missing == []


def test_every_index_leads_with_user_id_or_is_a_listed_cross_user_path():
    across = {
        (model._meta.db_table, name)
        for model in _user_scoped()
        for name, columns in _indexes(model).items()
        if columns[0] != USER
    }
    assert across == set(CROSS_USER_INDEXES)


def test_the_primary_keys_are_the_listed_id_keys():
    primary = {
        model._meta.db_table: model._meta.pk.column  # type: ignore[union-attr]
        for model in _user_scoped()
    }
    assert {table for table, column in primary.items() if column != USER} == ID_PRIMARY_KEYS


def test_docs_scaling_names_every_exception():
    text = DOCS.read_text()
    for table, name in CROSS_USER_INDEXES:
        assert f"`{name}`" in text and f"`{table}`" in text, (table, name)
    for table in ID_PRIMARY_KEYS:
        assert f"`{table}`" in text, table
