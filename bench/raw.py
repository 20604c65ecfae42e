"""The raw door: the statements of ``bench/raw_sql.py`` on psycopg, as the platform issues its own."""

import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from psycopg import sql

from bench import raw_sql
from bench.raw_sql import ACCESS_COUNT, PAGE_LIMIT, RECENT_AT


class Raw:
    """The bare statements the platform should issue, through psycopg, autocommit."""

    def __init__(self, conninfo: str) -> None:
        self.conninfo = conninfo

    def connect(self) -> psycopg.Connection[Any]:
        # Reads: client-side binding, as Django's psycopg backend uses: each statement is planned for its own
        # values, as the platform's reads are. (psycopg's default would prepare a statement run 5 times, and
        # PostgreSQL may then switch it to a generic plan: the per-user search once became a 32 ms index
        # scan instead of a 0.3 ms walk of the user's index.) Writes: prepared, as the platform's are.
        return psycopg.connect(self.conninfo, autocommit=True, cursor_factory=psycopg.ClientCursor)

    def rows(
        self, conn: psycopg.Connection[Any], statement: sql.Composed, params: dict[str, Any]
    ) -> list[Any]:
        return conn.execute(statement, params).fetchall()

    def write(self, conn: psycopg.Connection[Any], statement: sql.Composed, params: dict[str, Any]) -> Any:
        """A write statement as the platform issues its writes: prepared, its values bound on the server."""
        return psycopg.Cursor(conn).execute(statement, params, prepare=True)

    def recall(self, conn: psycopg.Connection[Any], *, user: str, agent: str, order: str) -> list[Any]:
        """Recall in one statement (``raw_sql.recall``), ordered here, as the platform does."""
        now = datetime.now(UTC)
        params = {"user": user, "agent": agent, "threshold": now - timedelta(hours=1), "now": now}
        cursor = conn.execute(raw_sql.recall(order), params | raw_sql.recall_params(order))
        cursor.nextset()  # the lock statement's row, then the recall's
        rows = cursor.fetchall()
        rows.sort(key=lambda r: (r[RECENT_AT], r[0]), reverse=True)
        head = raw_sql.recall_head(order)
        if order == "most_accessed":
            rows[head:] = sorted(
                rows[head:], key=lambda r: (r[ACCESS_COUNT], r[RECENT_AT], r[0]), reverse=True
            )
        return rows

    def upsert_many(
        self, conn: psycopg.Connection[Any], *, agent: str, writes: list[tuple[str, str, str]]
    ) -> None:
        """Upserts (user, key, text) and their history events, in one transaction."""
        at = datetime.now(UTC)

        def params(user: str, key: str, text: str) -> dict[str, Any]:
            return {
                "user": user, "key": key, "value": json.dumps(text), "text": text,
                "key_folded": key.casefold(), "text_folded": text.casefold(), "category": "fact",
                "agent": agent, "group_ids": "[]", "conflicted": False, "at": at, "action": "updated",
            }  # fmt: skip

        with conn.transaction():
            if len(writes) == 1:  # one statement writes the entry and its event, as the platform does
                self.write(conn, raw_sql.UPSERT_WITH_EVENT, params(*writes[0]))
                return
            events = []
            for write in writes:
                (entry_id,) = self.write(conn, raw_sql.UPSERT, params(*write)).fetchone()
                events.append(params(*write) | {"entry_id": entry_id})
            with conn.cursor() as cur:
                cur.executemany(raw_sql.INSERT_EVENT, events)

    def search(self, conn: psycopg.Connection[Any], *, query: str, user: str | None, agent: str) -> list[Any]:
        if user is None:
            tsquery = raw_sql.fulltext_terms(query)
            return self.rows(conn, raw_sql.SEARCH_ALL_USERS, {"tsquery": tsquery, "limit": PAGE_LIMIT})
        params = {"user": user, "agent": agent, "folded": query.casefold(), "limit": PAGE_LIMIT}
        return self.rows(conn, raw_sql.SEARCH_PER_USER, params)

    def append_message(self, conn: psycopg.Connection[Any], conversation: str, text: str) -> None:
        """A conversation append: take the conversation's row lock, insert at its next position (and the
        history's next number)."""
        with conn.transaction():
            ((position,),) = self.rows(conn, raw_sql.LOCK_CONVERSATION, {"conversation": conversation})
            conn.execute(
                raw_sql.INSERT_MESSAGE,
                {
                    "id": uuid.uuid4(),
                    "conversation": conversation,
                    "position": position,
                    "content": json.dumps([{"type": "text", "text": text}]),
                    "at": datetime.now(UTC),
                },
            )
            conn.execute(raw_sql.BUMP_CONVERSATION, {"conversation": conversation})

    def erase(self, conn: psycopg.Connection[Any], user: str) -> None:
        with conn.transaction():
            for statement in raw_sql.ERASE_DELETES:
                conn.execute(statement, {"user": user})
            conn.execute(raw_sql.ERASED_EVENT, {"user": user, "at": datetime.now(UTC)})
