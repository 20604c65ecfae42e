"""ModelRows builds the same instances as Django's own from_db, with and without init signals connected."""

from django.db import connection
from django.db.models.signals import post_init

from apikeys.services import _key_lookup
from memoryplatform.rows import ModelRows
from tests.factories import MemoryEntryFactory
from usermemory.models import MemoryEntry

ENTRIES = ModelRows(MemoryEntry, exclude=["value_text"])
ENTRY_BY_ID = f"SELECT {ENTRIES.columns()} FROM {MemoryEntry._meta.db_table} WHERE id = %s"  # noqa: S608


def _fetch(sql: str, params: list) -> tuple:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone()


def _as_django_loads_it(rows, row: tuple):  # type: ignore[no-untyped-def]
    converters = rows._converters_for(connection)
    values = list(row)
    for index, column, functions in converters:
        for function in functions:
            values[index] = function(values[index], column, connection)
    return rows.model.from_db(connection.alias, rows.attnames, values)


def _fields(instance) -> dict:  # type: ignore[no-untyped-def]
    return {k: v for k, v in instance.__dict__.items() if k != "_state"}


def test_entries_match_from_db_and_defer_the_rest(agent_a):
    entry = MemoryEntryFactory(user_id="u1", key="k", value={"a": [1, 2]}, source_agent_id=agent_a.id)
    row = _fetch(ENTRY_BY_ID, [entry.id])
    built, expected = ENTRIES.build(row), _as_django_loads_it(ENTRIES, row)
    assert type(built) is MemoryEntry and _fields(built) == _fields(expected)
    assert (built._state.adding, built._state.db) == (False, connection.alias)
    assert built.get_deferred_fields() == {"value_text"} and built.value_text == entry.value_text
    assert built.source_agent == agent_a and built.value == {"a": [1, 2]}


def test_key_lookup_rows_match_from_db(agent_a):
    from apikeys.services import apikey_create

    key, _ = apikey_create(role="agent", agent_id=agent_a.id, label="t")
    lookup = _key_lookup()
    row = _fetch(lookup.sql, [key.prefix])
    width = len(lookup.key)
    for rows, part in ((lookup.key, row[:width]), (lookup.agent, row[width : width + len(lookup.agent)])):
        assert _fields(rows.build(part)) == _fields(_as_django_loads_it(rows, part))


def test_init_signals_still_fire_when_connected(agent_a):
    entry = MemoryEntryFactory(user_id="u1", key="k", source_agent_id=agent_a.id)
    seen: list[int] = []

    def receiver(sender, instance, **kwargs):  # type: ignore[no-untyped-def]
        seen.append(instance.id)

    post_init.connect(receiver, sender=MemoryEntry)
    try:
        row = _fetch(ENTRY_BY_ID, [entry.id])
        assert ENTRIES.build(row).id == entry.id
    finally:
        post_init.disconnect(receiver, sender=MemoryEntry)
    assert seen == [entry.id]
