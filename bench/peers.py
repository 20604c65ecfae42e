"""The peers, measured beside the platform: LangGraph's ``PostgresStore`` (a fourth door of recall and upsert,
on the same memories, in the same database) and the Agents SDK's own ``SQLiteSession`` (a conversation append
of openai-agents' session, a peer figure only: none of the platform's code runs on SQLite)."""

import asyncio
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from bench.measure import Door, Phase, log
from bench.raw_sql import RECALL_LIMIT

Write = tuple[str, str, str]


class LangGraphPeer:
    """``PostgresStore`` (no vector index) on a ``psycopg_pool`` of the run's concurrency, namespace
    ``("memories", userId)``: ``search(ns, limit=50)`` beside recall, ``put`` beside upsert."""

    def __init__(self, store: Any, pool: Any) -> None:
        self.store, self.pool = store, pool

    @classmethod
    def open(cls, conninfo: str, concurrency: int) -> "LangGraphPeer | None":
        try:
            from langgraph.store.postgres import PostgresStore
            from psycopg.rows import dict_row
            from psycopg_pool import ConnectionPool
        except ImportError as exc:
            log(f"LangGraph peer skipped: {exc}")
            return None
        pool = ConnectionPool(
            conninfo,
            min_size=concurrency,
            max_size=concurrency,
            kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
            open=True,
        )
        # dict_row makes its connections yield dicts, which the pool's type does not carry
        return cls(PostgresStore(cast(Any, pool)), pool)

    def doors(
        self,
        *,
        typical: str,
        heavy: str,
        new_write: Callable[[], Write],
        existing_write: Callable[[], Write],
        value: Callable[[], dict[str, Any]],
    ) -> dict[str, Door]:
        store = self.store

        def put(make: Callable[[], Write]) -> Door:
            def call(_ctx: Any) -> None:
                user, key, _ = make()
                store.put(("memories", user), key, value())

            return Door(call=call)

        return {
            "recall most_recent typical": Door(
                call=lambda _c: store.search(("memories", typical), limit=RECALL_LIMIT)
            ),
            "recall most_recent heaviest": Door(
                call=lambda _c: store.search(("memories", heavy), limit=RECALL_LIMIT)
            ),
            "upsert new key": put(new_write),
            "upsert existing key": put(existing_write),
        }

    def get_door(self, existing: Callable[[], tuple[str, str]]) -> Door:
        def call(_ctx: Any) -> None:
            user, key = existing()
            self.store.get(("memories", user), key)

        return Door(call=call)

    def close(self) -> None:
        self.pool.close()


def sqlite_session_append(*, n: int, warmup: int, text: Callable[[], str]) -> Phase | None:
    """``n`` appends of one item to an Agents SDK ``SQLiteSession`` in a file, one client."""
    try:
        from agents import SQLiteSession
    except ImportError as exc:
        log(f"SQLiteSession skipped: {exc}")
        return None
    with tempfile.TemporaryDirectory() as tmp:
        session = SQLiteSession("bench-conversation", Path(tmp) / "session.sqlite3")

        async def go() -> Phase:
            phase = Phase()
            started_all = time.perf_counter()
            for i in range(n + warmup):
                item: Any = {"role": "user" if i % 2 else "assistant", "content": text()}
                started = time.perf_counter()
                await session.add_items([item])
                if i >= warmup:
                    phase.latencies.append(time.perf_counter() - started)
            phase.wall = time.perf_counter() - started_all
            await session.get_items(limit=RECALL_LIMIT)
            return phase

        phase = asyncio.run(go())
        session.close()
    return phase
