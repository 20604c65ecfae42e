"""The ranked statements as text: each statement the ranked-search kit (:mod:`memoryplatform.ranked`) composes
for memories and messages is rendered to a file of ``tests/memoryplatform/sql/``, which a reader can read and
a diff shows. A change of the SQL fails here until the files are written again:

    UPDATE_SQL_SNAPSHOTS=1 pytest tests/memoryplatform/test_ranked_sql.py

and the diff of the ``.sql`` files goes into the commit with the change that made it."""

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from psycopg import sql

from conversations import store as messages_sql
from memoryplatform.ranked import STORED_CONFIG
from usermemory.sql import search as memories_sql

SNAPSHOTS = Path(__file__).parent / "sql"
UPDATE = os.environ.get("UPDATE_SQL_SNAPSHOTS", "") == "1"


def _memories(mode: str, *, stored: bool = True) -> Callable[[], sql.Composable]:
    def render() -> sql.Composable:
        return memories_sql._ranked_sql(
            agent_view=True,
            all_of_agent=False,
            semantic=mode != "fulltext",
            fulltext=mode != "semantic",
            stored=stored,
        )

    return render


def _recall(mode: str) -> Callable[[], sql.Composable]:
    def render() -> sql.Composable:
        return memories_sql._ranked_recall_sql(
            agent_view=True,
            all_of_agent=False,
            order="most_recent",
            semantic=mode != "fulltext",
            fulltext=mode != "semantic",
            stored=True,
        )

    return render


def _messages(mode: str, *, stored: bool = True) -> Callable[[], sql.Composable]:
    def render() -> sql.Composable:
        return messages_sql._ranked_sql(
            semantic=mode != "fulltext", fulltext=mode != "semantic", stored=stored
        )

    return render


# Each statement by its file's name: the three kinds of ranked read of each store, the full-text side as it
# parses the text (a SEARCH_LANGUAGE other than memory_simple), and a ranked recall.
STATEMENTS: dict[str, Callable[[], sql.Composable]] = {
    "memories_semantic": _memories("semantic"),
    "memories_fulltext": _memories("fulltext"),
    "memories_hybrid": _memories("hybrid"),
    "memories_hybrid_parsed": _memories("hybrid", stored=False),
    "memories_recall_hybrid": _recall("hybrid"),
    "messages_semantic": _messages("semantic"),
    "messages_fulltext": _messages("fulltext"),
    "messages_hybrid": _messages("hybrid"),
    "messages_hybrid_parsed": _messages("hybrid", stored=False),
}


def rendered(statement: sql.Composable) -> str:
    """The statement as psycopg sends it (identifiers quoted), ending with a newline."""
    return statement.as_string(None).rstrip() + "\n"


@pytest.mark.parametrize("name", sorted(STATEMENTS))
def test_ranked_statement_matches_its_file(name: str) -> None:
    path = SNAPSHOTS / f"{name}.sql"
    text = rendered(STATEMENTS[name]())
    if UPDATE:
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"{path} is missing: run with UPDATE_SQL_SNAPSHOTS=1 to write it."
    assert text == path.read_text(), (
        f"The SQL of {name} changed: run with UPDATE_SQL_SNAPSHOTS=1 to write {path}, and commit its diff."
    )


def test_every_file_is_a_statement() -> None:
    """No file is left over from a statement that is gone."""
    assert {p.stem for p in SNAPSHOTS.glob("*.sql")} == set(STATEMENTS)


def test_memory_simple_reads_the_stored_lexemes() -> None:
    """The stored configuration reads each row's ``search_vector``; any other parses the text per query."""
    assert STORED_CONFIG == "memory_simple"
    assert "search_vector" in (SNAPSHOTS / "memories_hybrid.sql").read_text()
    assert "search_vector" not in (SNAPSHOTS / "memories_hybrid_parsed.sql").read_text()
    assert "m.search_vector" in (SNAPSHOTS / "messages_hybrid.sql").read_text()
    assert "conversations_message_document" in (SNAPSHOTS / "messages_hybrid_parsed.sql").read_text()
