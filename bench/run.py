"""Run the benchmarks: every operation through three doors (raw SQL, service, HTTP), side by side, in one run.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench .venv/bin/python -m bench.run --out /tmp/pg.json
    DATABASE_URL=sqlite:////tmp/bench.sqlite3 .venv/bin/python -m bench.run --out /tmp/sqlite.json
    .venv/bin/python -m bench.run --smoke      # a few hundred memories, every operation a few times

The database must have been filled by ``python -m bench.load`` first (the run writes to it: new keys,
updates, erasures). Each door is measured twice: one client (median and p99 latency), then ``--concurrency``
clients (throughput). ``http`` is ``manage.py serve`` (uvicorn, 2 workers of 4 threads, as ``make run`` runs
it; gunicorn with 2 gthread workers of 2 threads before session 7) on loopback, started and stopped by this
run.
"""

import argparse
import asyncio
import contextlib
import http.client
import itertools
import json
import os
import platform
import random
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlparse

from bench import data
from bench.load import is_postgres, sqlite_path
from memoryplatform.locks import ADVISORY_XACT_LOCK, LockId

ROOT = Path(__file__).resolve().parent.parent
SEQ = itertools.count(1)  # unique suffixes for new keys and turn ids, across phases and doors
RUN_TAG = format(int(time.time()) % 10**6, "06d")
TABLE = "usermemory_memoryentry"
COLS = (
    "id, user_id, key, value, category, visibility, source_agent_id, group_ids, source_conversation_id, "
    "conflicted, access_count, created_at, updated_at, last_accessed_at"
)
RECALL_LIMIT = 50
ACCESS_COUNT, RECENT_AT = 10, 12  # positions in COLS
PAGE_LIMIT = 1000  # the list/search endpoints' default page


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", flush=True)


# --- Measurement ----------------------------------------------------------------------------------


def percentile(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, int(round(p / 100 * len(ordered) + 0.5)) - 1))
    return ordered[rank]


@dataclass
class Phase:
    latencies: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    wall: float = 0.0
    concurrency: int = 1

    def summary(self) -> dict[str, Any]:
        n = len(self.latencies)
        return {
            "n": n,
            "concurrency": self.concurrency,
            "p50_ms": percentile(self.latencies, 50) * 1000,
            "p99_ms": percentile(self.latencies, 99) * 1000,
            "p999_ms": percentile(self.latencies, 99.9) * 1000,
            "max_ms": max(self.latencies, default=float("nan")) * 1000,
            "rps": n / self.wall if self.wall else float("nan"),
            "errors": len(self.errors),
            "first_error": self.errors[0] if self.errors else None,
        }


@dataclass
class Door:
    """How one door calls an operation: per-thread setup (a connection), the call, and teardown."""

    call: Callable[[Any], object]
    setup: Callable[[], Any] = lambda: None
    teardown: Callable[[Any], None] = lambda ctx: None


def drive(door: Door, *, n: int, concurrency: int, seconds: float) -> Phase:
    """``n`` calls (or ``seconds``, whichever ends first) from ``concurrency`` threads."""
    phase = Phase(concurrency=concurrency)
    counter = itertools.count()
    lock = threading.Lock()
    ready = threading.Barrier(concurrency + 1)
    deadline = [0.0]

    def worker() -> None:
        ctx = door.setup()
        mine: list[float] = []
        try:
            ready.wait()
            while next(counter) < n and time.perf_counter() < deadline[0]:
                started = time.perf_counter()
                try:
                    door.call(ctx)
                except Exception as exc:  # noqa: BLE001 (counted and reported)
                    with lock:
                        phase.errors.append(f"{type(exc).__name__}: {exc}"[:300])
                else:
                    mine.append(time.perf_counter() - started)
        finally:
            with lock:
                phase.latencies.extend(mine)
            door.teardown(ctx)

    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for thread in threads:
        thread.start()
    deadline[0] = time.perf_counter() + seconds
    started = time.perf_counter()
    ready.wait()
    for thread in threads:
        thread.join()
    phase.wall = time.perf_counter() - started
    return phase


# --- Raw SQL (the floor) --------------------------------------------------------------------------


class Raw:
    """The bare statements the platform should issue, on psycopg (PostgreSQL) or sqlite3."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.pg = is_postgres(url)

    def connect(self) -> Any:
        if self.pg:
            import psycopg

            # Reads: client-side binding, as Django's psycopg backend uses: each statement is planned for its
            # own values, as the platform's reads are. (psycopg's default would prepare a statement run 5
            # times, and PostgreSQL may then switch it to a generic plan: the per-user search became a 32 ms
            # trigram index scan instead of a 0.3 ms walk of the user's index.) Writes: prepared, as the
            # platform's are (:meth:`write`).
            return psycopg.connect(self.url, autocommit=True, cursor_factory=psycopg.ClientCursor)
        conn = sqlite3.connect(
            sqlite_path(self.url), isolation_level=None, timeout=30, check_same_thread=False
        )
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        return conn

    def sql(self, text: str) -> str:
        if self.pg:
            return text.replace("{J}", "%s::jsonb").replace("{LIKE}", "ILIKE")
        return text.replace("{J}", "?").replace("{LIKE}", "LIKE").replace("%s", "?")

    def like(self, column: str) -> str:
        return f"{column} {{LIKE}} %s" + ("" if self.pg else " ESCAPE '\\'")

    def ts(self, value: datetime) -> Any:
        return value if self.pg else value.astimezone(UTC).replace(tzinfo=None).isoformat(" ")

    def rows(self, conn: Any, text: str, params: list[Any]) -> list[tuple]:
        return conn.execute(self.sql(text), params).fetchall()

    def execute(self, conn: Any, text: str, params: list[Any]) -> None:
        conn.execute(self.sql(text), params)

    def write(self, conn: Any, text: str, params: list[Any]) -> Any:
        """A write statement as the platform issues its writes: on PostgreSQL prepared, with its values bound
        on the server (``memoryplatform.rows.prepared_cursor``)."""
        if not self.pg:
            return conn.execute(self.sql(text), params)
        import psycopg

        return psycopg.Cursor(conn).execute(self.sql(text), params, prepare=True)

    @contextlib.contextmanager
    def transaction(self, conn: Any) -> Iterator[None]:
        if self.pg:
            with conn.transaction():
                yield
            return
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def in_list(self, values: list[Any]) -> str:
        return "(" + ", ".join(["%s"] * len(values)) + ")" if values else "(NULL)"

    def visible(self) -> str:
        """Visible(user, agent): the agent's groups read by a subquery, as the platform's statement does.
        Parameters: user, agent, user, agent."""
        return (
            "user_id = %s AND (visibility = 'global' OR (visibility = 'self' AND source_agent_id = %s) "
            "OR (visibility = 'group' AND id IN (SELECT entry_id FROM usermemory_memoryentrygroup "
            "WHERE user_id = %s AND group_id IN (SELECT agentgroup_id FROM apikeys_agentgroup_members "
            "WHERE agent_id = %s))))"
        )

    def recall(self, conn: Any, *, user: str, agent: str, order: str) -> list[tuple]:
        """One statement: pick the visible entries (the newest ``head``; for most_accessed also the most
        accessed of the rest), count their access, return them. Ordered here, as the platform does.
        On PostgreSQL it first takes the user's recall lock (an advisory lock, in the same statement), so
        concurrent recalls of one user queue there and not on the rows' locks."""
        where, params = self.visible(), [user, agent, user, agent]
        head = RECALL_LIMIT if order == "most_recent" else max(1, RECALL_LIMIT // 5)
        picks, head_where, lock = "WITH ", where, []
        if self.pg:
            picks += f"user_lock AS MATERIALIZED (SELECT {ADVISORY_XACT_LOCK} AS held), "
            head_where, lock = f"(SELECT true FROM user_lock) AND {where}", [LockId.USER_RECALL, user]
        picks += (
            f"head AS (SELECT id FROM {TABLE} WHERE {head_where} "
            f"ORDER BY updated_at DESC, id DESC LIMIT {head})"
        )
        chosen = "SELECT id FROM head"
        if order == "most_accessed":
            picks += (
                f", rest AS (SELECT id FROM {TABLE} WHERE {where} AND id NOT IN (SELECT id FROM head) "
                f"ORDER BY access_count DESC, updated_at DESC, id DESC LIMIT {RECALL_LIMIT - head})"
            )
            chosen += " UNION ALL SELECT id FROM rest"
            params = params + params
        now = datetime.now(UTC)
        rows = self.rows(
            conn,
            f"{picks} UPDATE {TABLE} SET access_count = access_count + 1, last_accessed_at = CASE WHEN "
            f"last_accessed_at IS NULL OR last_accessed_at < %s THEN %s ELSE last_accessed_at END "
            f"WHERE id IN ({chosen}) RETURNING {COLS}",
            [*lock, *params, self.ts(now - timedelta(hours=1)), self.ts(now)],
        )
        rows.sort(key=lambda r: (r[RECENT_AT], r[0]), reverse=True)
        if order == "most_accessed":
            rest = sorted(rows[head:], key=lambda r: (r[ACCESS_COUNT], r[RECENT_AT], r[0]), reverse=True)
            rows[head:] = rest
        return rows

    def upsert_sql(self) -> str:
        return (
            f"INSERT INTO {TABLE} (user_id, key, value, value_text, category, visibility, source_agent_id, "
            f"group_ids, source_conversation_id, conflicted, access_count, created_at, updated_at, "
            f"last_accessed_at) VALUES (%s, %s, {{J}}, %s, %s, 'self', %s, {{J}}, NULL, %s, 0, %s, %s, NULL) "
            f"ON CONFLICT (user_id, key, source_agent_id) WHERE NOT (visibility = 'global') DO UPDATE SET "
            f"value = excluded.value, value_text = excluded.value_text, category = excluded.category, "
            f"group_ids = excluded.group_ids, source_conversation_id = excluded.source_conversation_id, "
            f"conflicted = excluded.conflicted, updated_at = excluded.updated_at, "
            f"visibility = excluded.visibility RETURNING id"
        )

    EVENT_SQL = (
        "INSERT INTO usermemory_memoryevent (entry_id, user_id, key, action, actor_type, actor_id, "
        "key_prefix, old_value, new_value, owner, old_visibility, old_group_ids, visibility, group_ids, "
        "created_at) VALUES (%s, %s, %s, %s, 'agent', %s, '', NULL, {J}, %s, 'self', '[]', 'self', '[]', %s)"
    )

    def upsert_many(self, conn: Any, *, agent: str, writes: list[tuple[str, str, str]]) -> None:
        """Upserts (user, key, text) and their history events, in one transaction."""
        at = self.ts(datetime.now(UTC))
        if self.pg and len(writes) == 1:  # one statement writes the entry and its event, as the platform does
            ((user, key, text),) = writes
            event = self.EVENT_SQL.replace("VALUES (%s, ", "SELECT id, ").removesuffix(")") + " FROM up"
            with self.transaction(conn):
                self.write(
                    conn,
                    f"WITH up AS ({self.upsert_sql()}), event AS ({event}) SELECT id FROM up",
                    [user, key, json.dumps(text), text, "fact", agent, "[]", False, at, at]
                    + [user, key, "updated", agent, json.dumps(text), agent, at],
                )
            return
        with self.transaction(conn):
            ids = []
            for user, key, text in writes:
                params = [user, key, json.dumps(text), text, "fact", agent, "[]", False, at, at]
                ids.append(self.write(conn, self.upsert_sql(), params).fetchone()[0])
            events = [
                [entry_id, user, key, "updated", agent, json.dumps(text), agent, at]
                for entry_id, (user, key, text) in zip(ids, writes, strict=True)
            ]
            if self.pg and len(events) > 1:
                with conn.cursor() as cur:
                    cur.executemany(self.sql(self.EVENT_SQL), events)
            else:
                for row in events:
                    self.write(conn, self.EVENT_SQL, row)

    def search(self, conn: Any, *, query: str, user: str | None, agent: str) -> list[tuple]:
        pattern = "%" + query.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        match = f"({self.like('key')} OR {self.like('value_text')})"
        if user is None:
            where, params = match, [pattern, pattern]
        else:
            where, params = (
                f"{self.visible()} AND {match}",
                [user, agent, user, agent, pattern, pattern],
            )
        return self.rows(
            conn,
            f"SELECT {COLS} FROM {TABLE} WHERE {where} ORDER BY updated_at DESC, id DESC LIMIT {PAGE_LIMIT}",
            params,
        )

    def append_message(self, conn: Any, conversation: str, text: str) -> None:
        """A conversation append: take the conversation's row lock, insert at its next sequence number."""
        with self.transaction(conn):
            (seq,) = self.rows(
                conn,
                "SELECT next_seq FROM conversations_conversation WHERE id = %s"
                + (" FOR UPDATE" if self.pg else ""),
                [conversation],
            )[0]
            self.execute(
                conn,
                "INSERT INTO conversations_message (id, conversation_id, seq, channel, role, agent_id, "
                "memory_epoch, content, session_id, created_at) "
                "VALUES (%s, %s, %s, 'history', 'user', NULL, NULL, {J}, 'bench', %s)",
                [
                    str(uuid.uuid4()) if self.pg else uuid.uuid4().hex,
                    conversation,
                    seq,
                    json.dumps([{"type": "text", "text": text}]),
                    self.ts(datetime.now(UTC)),
                ],
            )
            self.execute(
                conn,
                "UPDATE conversations_conversation SET next_seq = next_seq + 1 WHERE id = %s",
                [conversation],
            )

    def erase(self, conn: Any, user: str) -> None:
        with self.transaction(conn):
            for table in (
                "usermemory_memoryentrygroup",
                TABLE,
                "usermemory_memoryevent",
                "usermemory_turnwritecount",
            ):
                self.execute(conn, f"DELETE FROM {table} WHERE user_id = %s", [user])
            self.execute(
                conn,
                "INSERT INTO usermemory_memoryevent (entry_id, user_id, key, action, actor_type, actor_id, "
                "key_prefix, old_value, new_value, owner, old_visibility, old_group_ids, visibility, "
                "group_ids, created_at) "
                "VALUES (NULL, %s, '', 'erased', 'key', 'admin', '', NULL, NULL, '', 'self', '[]', 'self', "
                "'[]', %s)",
                [user, self.ts(datetime.now(UTC))],
            )


# --- HTTP (manage.py serve: uvicorn, 2 workers x 4 threads) ------------------------------------------


class Server:
    def __init__(self, url: str, logfile: Path) -> None:
        self.url = url
        self.logfile = logfile
        self.port = 0
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        env = os.environ | {"DATABASE_URL": self.url, "DEBUG": "false"}
        cmd = [
            sys.executable, "manage.py", "serve", "--port", str(self.port),
            "--workers", "2", "--threads", "4", "--no-dream-scheduler",
        ]  # fmt: skip
        out = self.logfile.open("ab")
        self.proc = subprocess.Popen(  # noqa: S603 (our own interpreter, fixed arguments)
            cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
        out.close()
        deadline = time.time() + 60
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"serve exited with {self.proc.returncode}; see {self.logfile}")
            with contextlib.suppress(OSError):
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
                conn.request("GET", "/healthz")
                if conn.getresponse().status == 200:
                    conn.close()
                    log(f"serve (uvicorn, 2 workers x 4 threads) up on port {self.port}, pid {self.proc.pid}")
                    return
            time.sleep(0.3)
        raise RuntimeError(f"serve did not answer /healthz; see {self.logfile}")

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)  # the group we started (start_new_session): master + workers
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
        log("serve stopped")

    def door(self, key: str, request: Callable[[], tuple[str, str, Any, set[int]]]) -> Door:
        """``request()`` gives (method, path, json body or None, accepted statuses)."""
        headers = {
            "Authorization": f"Bearer {key}",
            "Content-Type": "application/json",
            "Accept": "application/json",
        }

        def call(conn: http.client.HTTPConnection) -> None:
            method, path, body, accepted = request()
            extra = {"X-Turn-Id": f"turn-{RUN_TAG}-{next(SEQ)}"} if method == "PUT" else {}
            payload = None if body is None else json.dumps(body)
            try:
                conn.request(method, path, payload, headers | extra)
                response = conn.getresponse()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                conn.close()  # the server closed a kept-alive connection: one retry on a new one
                conn.request(method, path, payload, headers | extra)
                response = conn.getresponse()
            content = response.read()
            if response.status not in accepted:
                raise RuntimeError(f"{method} {path}: {response.status} {content[:200]!r}")

        return Door(
            call=call,
            setup=lambda: http.client.HTTPConnection("127.0.0.1", self.port, timeout=120),
            teardown=lambda conn: conn.close(),
        )


# --- The scenario ---------------------------------------------------------------------------------


@dataclass
class Settings:
    url: str
    n: int
    concurrency: int
    seconds: float
    tail: int
    erase_n: int
    peers: bool
    warmup: int = 5
    tail_seconds: float = 120.0
    only: str = ""


class Bench:
    def __init__(self, cfg: Settings) -> None:
        self.cfg = cfg
        self.raw = Raw(cfg.url)
        self.results: dict[str, Any] = {"ops": {}, "peers": {}, "tail": {}, "explain": {}, "queries": {}}
        self.texts = data.TextStream(random.Random(7), data.vocabulary(random.Random(7)))
        self.text_lock = threading.Lock()

    def text(self) -> str:
        with self.text_lock:
            return self.texts.value()

    # Set-up: keys, callers, users, pools.
    def prepare(self) -> None:
        from django.core.management import call_command

        from apikeys.caller import Caller
        from apikeys.models import ApiKey
        from apikeys.services import apikey_create
        from usermemory import services

        call_command("migrate", verbosity=0, interactive=False)  # the schema may have moved on since the load
        agent = data.BENCH_AGENT
        services.policy_update(agent_id=agent, max_writes_per_turn=100)  # a batch of 20 is one turn
        agent_key, self.agent_raw_key = apikey_create(role="agent", agent_id=agent, label="bench")
        admin_key, self.admin_raw_key = apikey_create(role="admin", label="bench")
        self.agent = agent
        self.agent_caller = Caller.for_key(ApiKey.objects.select_related("agent").get(id=agent_key.id))
        self.admin_caller = Caller.for_key(ApiKey.objects.get(id=admin_key.id))
        conn = self.raw.connect()
        try:
            self.groups = [
                r[0]
                for r in self.raw.rows(
                    conn,
                    "SELECT agentgroup_id FROM apikeys_agentgroup_members WHERE agent_id = %s ORDER BY 1",
                    [agent],
                )
            ]
            sizes = self.raw.rows(
                conn, f"SELECT user_id, count(*) FROM {TABLE} GROUP BY user_id ORDER BY 2, 1", []
            )
            users = [u for u, _ in sizes]
            self.heavy, self.heavy_size = sizes[-1]
            self.typical, self.typical_size = sizes[len(sizes) // 2]
            rest = [u for u in users[len(users) // 5 : -max(1, len(users) // 20)] if u != self.typical]
            needed = 3 * (self.cfg.warmup + 3 * self.cfg.erase_n) + 3  # three doors, three phases each
            self.erase_pool = rest[:: max(2, len(rest) // needed)][:needed]
            erased = set(self.erase_pool)
            self.write_users = [u for u in rest if u not in erased][:2000] or [self.typical]
            pairs = self.raw.rows(
                conn,
                f"SELECT user_id, key FROM {TABLE} WHERE source_agent_id = %s AND visibility = 'self' "
                f"AND user_id IN {self.raw.in_list(self.write_users)} ORDER BY id",
                [agent, *self.write_users],
            )
            self.total = self.raw.rows(conn, f"SELECT count(*) FROM {TABLE}", [])[0][0]
            texts = [
                r[0]
                for r in self.raw.rows(
                    conn, f"SELECT value_text FROM {TABLE} WHERE user_id = %s", [self.typical]
                )
            ]
        finally:
            conn.close()
        if len(pairs) < 50:  # a small data set: make some of the agent's own keys to update
            for i in range(50):
                user = self.write_users[i % len(self.write_users)]
                key = f"bench-existing-{i}"
                self.raw_upsert_conn_free(user, key)
                pairs.append((user, key))
        random.Random(3).shuffle(pairs)
        self.existing = pairs
        # One conversation per door, each appended to by that door's clients only (they queue on its lock).
        from conversations.services import conversation_create

        self.conversations = {
            door: str(
                conversation_create(caller=self.agent_caller, user_id=self.typical, title=f"bench {door}").id
            )
            for door in ("raw", "service", "http")
        }
        if not self.raw.pg:  # SQLite stores a UUID as 32 hex digits
            self.conversations["raw"] = self.conversations["raw"].replace("-", "")
        # Per-user search: a word of 5+ letters found in about 8 % of the typical user's entries.
        # Admin search: a rare word (about 0.1 % of all values).
        counts: dict[str, int] = {}
        for text in texts:
            for word in set(text.split()):
                if len(word) >= 5:
                    counts[word] = counts.get(word, 0) + 1
        target = max(2.0, 0.08 * len(texts))
        self.common = min(sorted(counts), key=lambda w: abs(counts[w] - target)) if counts else "bada"
        self.rare = data.search_terms()[1]
        self.results["data"] = {
            "memories": self.total,
            "users": len(users),
            "typical_user": self.typical,
            "typical_user_entries": self.typical_size,
            "heaviest_user": self.heavy,
            "heaviest_user_entries": self.heavy_size,
            "agent": agent,
            "agent_groups": self.groups,
            "search_user_term": self.common,
            "search_all_term": self.rare,
        }
        log(f"data: {json.dumps(self.results['data'])}")

    def raw_upsert_conn_free(self, user: str, key: str) -> None:
        conn = self.raw.connect()
        try:
            self.raw.upsert_many(conn, agent=self.agent, writes=[(user, key, self.text())])
        finally:
            conn.close()

    # Items each call takes: thread-safe through the SEQ counter.
    def new_write(self) -> tuple[str, str, str]:
        i = next(SEQ)
        return self.write_users[i % len(self.write_users)], f"bench.{RUN_TAG}.{i:07d}", self.text()

    def existing_write(self) -> tuple[str, str, str]:
        user, key = self.existing[next(SEQ) % len(self.existing)]
        return user, key, self.text()

    def batch_writes(self) -> list[tuple[str, str, str]]:
        i = next(SEQ)
        user = self.write_users[i % len(self.write_users)]
        return [(user, f"bench.{RUN_TAG}.b{i:07d}.{j:02d}", self.text()) for j in range(20)]

    def next_erase_user(self) -> str:
        return self.erase_pool[next(self.erase_counter)]

    # Doors for each operation.
    def raw_door(self, call: Callable[[Any], object]) -> Door:
        return Door(call=call, setup=self.raw.connect, teardown=lambda conn: conn.close())

    def service_door(self, call: Callable[[], object]) -> Door:
        from django.db import connection

        return Door(call=lambda _ctx: call(), teardown=lambda _ctx: connection.close())

    def operations(self, server: Server | None) -> dict[str, dict[str, Door | None]]:
        from conversations import services as conversation_services
        from usermemory import selectors, services
        from usermemory.services import MemoryWrite

        raw, agent = self.raw, self.agent
        ops: dict[str, dict[str, Door | None]] = {}

        def write_of(user: str, key: str, text: str) -> MemoryWrite:
            return MemoryWrite(user_id=user, key=key, value=text, category="fact", visibility="self")

        def body_of(user: str, key: str, text: str) -> dict[str, Any]:
            return {"userId": user, "key": key, "value": text, "category": "fact", "visibility": "self"}

        def recall_doors(user: str, order: str) -> dict[str, Door | None]:
            path = f"/usermemorystore/memories/{user}/visible?order={order}&limit={RECALL_LIMIT}"
            return {
                "raw": self.raw_door(lambda c: raw.recall(c, user=user, agent=agent, order=order)),
                "service": self.service_door(
                    lambda: services.memory_recall(
                        caller=self.agent_caller, user_id=user, order=order, limit=RECALL_LIMIT
                    )
                ),
                "http": server.door(self.agent_raw_key, lambda: ("GET", path, None, {200}))
                if server
                else None,
            }

        def upsert_doors(make: Callable[[], tuple[str, str, str]]) -> dict[str, Door | None]:
            return {
                "raw": self.raw_door(lambda c: raw.upsert_many(c, agent=agent, writes=[make()])),
                "service": self.service_door(
                    lambda: services.memory_upsert(
                        caller=self.agent_caller,
                        write=write_of(*make()),
                        turn_id=f"turn-{RUN_TAG}-{next(SEQ)}",
                    )
                ),
                "http": server.door(
                    self.agent_raw_key,
                    lambda: ("PUT", "/usermemorystore/memories", body_of(*make()), {200, 201}),
                )
                if server
                else None,
            }

        for label, user in (("typical", self.typical), ("heaviest", self.heavy)):
            for order in ("most_recent", "most_accessed"):
                ops[f"recall {order} {label}"] = recall_doors(user, order)
        for label, make in (("new key", self.new_write), ("existing key", self.existing_write)):
            ops[f"upsert {label}"] = upsert_doors(make)
        ops["batch upsert of 20"] = {
            "raw": self.raw_door(lambda c: raw.upsert_many(c, agent=agent, writes=self.batch_writes())),
            "service": self.service_door(
                lambda: services.memory_upsert_batch(
                    caller=self.agent_caller,
                    writes=[write_of(*w) for w in self.batch_writes()],
                    turn_id=f"turn-{RUN_TAG}-{next(SEQ)}",
                )
            ),
            "http": server.door(
                self.agent_raw_key,
                lambda: (
                    "PUT",
                    "/usermemorystore/memories/batch",
                    [body_of(*w) for w in self.batch_writes()],
                    {200},
                ),
            )
            if server
            else None,
        }
        user, q = self.typical, self.common
        ops["search per user (typical)"] = {
            "raw": self.raw_door(lambda c: raw.search(c, query=q, user=user, agent=agent)),
            "service": self.service_door(
                lambda: selectors.memory_search(
                    caller=self.agent_caller, user_id=user, query=q, limit=PAGE_LIMIT
                )
            ),
            "http": server.door(
                self.agent_raw_key,
                lambda: ("GET", f"/usermemorystore/memories/{user}/search?q={quote(q)}", None, {200}),
            )
            if server
            else None,
        }
        rare = self.rare
        ops["admin search, all users"] = {
            "raw": self.raw_door(lambda c: raw.search(c, query=rare, user=None, agent=agent)),
            "service": self.service_door(
                lambda: list(
                    selectors.memory_search_all_users(caller=self.admin_caller, query=rare)[:PAGE_LIMIT]
                )
            ),
            "http": server.door(
                self.admin_raw_key, lambda: ("GET", f"/v1/memories/search?q={quote(rare)}", None, {200})
            )
            if server
            else None,
        }
        self.erase_counter = itertools.count()
        ops["GDPR erasure of one user"] = {
            "raw": self.raw_door(lambda c: raw.erase(c, self.next_erase_user())),
            "service": self.service_door(
                lambda: services.memory_erase_user(caller=self.admin_caller, user_id=self.next_erase_user())
            ),
            "http": server.door(
                self.admin_raw_key,
                lambda: ("DELETE", f"/usermemorystore/memories/{self.next_erase_user()}", None, {200}),
            )
            if server
            else None,
        }
        from conversations.services import MessageWrite

        conversations = self.conversations

        def message_of(text: str) -> MessageWrite:
            return MessageWrite(
                channel="history", role="user", content=[{"type": "text", "text": text}], session_id="bench"
            )

        ops["conversation append (1 message)"] = {
            "raw": self.raw_door(lambda c: raw.append_message(c, conversations["raw"], self.text())),
            "service": self.service_door(
                lambda: conversation_services.message_append(
                    caller=self.agent_caller,
                    conversation_id=conversations["service"],
                    writes=[message_of(self.text())],
                )
            ),
            "http": server.door(
                self.agent_raw_key,
                lambda: (
                    "POST",
                    f"/v1/conversations/{conversations['http']}/messages",
                    {
                        "role": "user",
                        "content": [{"type": "text", "text": self.text()}],
                        "sessionId": "bench",
                    },
                    {201},
                ),
            )
            if server
            else None,
        }
        if server:  # what any request costs through the server and Django, before the platform does a thing
            ops["http floor: GET /healthz (no key, no query)"] = {
                "http": server.door(self.agent_raw_key, lambda: ("GET", "/healthz", None, {200}))
            }
        for name, door in self.lg_doors().items():
            ops[name]["langgraph"] = door
        return ops

    def measure(
        self, doors: dict[str, Door], *, n: int | None = None, loaded_n: int | None = None, rounds: int = 4
    ) -> dict[str, dict[str, Any]]:
        """Warm-up, then ``n`` calls from one client, then up to ``loaded_n`` from --concurrency clients.

        The doors take turns in ``rounds`` short slices (every other round in reverse order), so a burst of
        load from elsewhere on the machine, or a drift in the database, hits all of them alike and the ratios
        stay fair.
        """
        cfg = self.cfg
        n = n or cfg.n
        loaded_n = loaded_n or max(10 * n, 20 * cfg.concurrency)
        phases = {name: {"c1": Phase(), "cN": Phase(concurrency=cfg.concurrency)} for name in doors}
        for door in doors.values():
            drive(door, n=cfg.warmup, concurrency=1, seconds=30)
        for label, total, clients in (("c1", n, 1), ("cN", loaded_n, cfg.concurrency)):
            for round_no in range(rounds):
                # Every other round in reverse order: a drift within a round (recall leaves new row versions
                # that the next scan walks) then falls on each door alike, not always on the later ones.
                turns = list(doors.items())
                for name, door in turns[::-1] if round_no % 2 else turns:
                    part = drive(
                        door, n=-(-total // rounds), concurrency=clients, seconds=cfg.seconds / rounds
                    )
                    merged = phases[name][label]
                    merged.latencies += part.latencies
                    merged.errors += part.errors
                    merged.wall += part.wall
        return {name: {label: phase.summary() for label, phase in p.items()} for name, p in phases.items()}

    def run_ops(self, server: Server | None) -> None:
        for name, doors in self.operations(server).items():
            if self.cfg.only and self.cfg.only not in name:
                continue
            present = {d: door for d, door in doors.items() if door is not None}
            if "erasure" in name:  # each call erases a user: a bounded number
                entry = self.measure(present, n=self.cfg.erase_n, loaded_n=2 * self.cfg.erase_n, rounds=1)
            else:
                entry = self.measure(present)
            self.results["ops"][name] = entry
            log(
                f"{name}: "
                + "  ".join(
                    f"{d} p50 {v['c1']['p50_ms']:.2f}ms {v['cN']['rps']:.0f}/s" for d, v in entry.items()
                )
            )

    # Admin search with and without the trigram index (PostgreSQL).
    def explain_admin_search(self) -> None:
        if not self.raw.pg:
            return
        conn = self.raw.connect()
        try:
            pattern = f"%{self.rare}%"
            query = (
                f"SELECT {COLS} FROM {TABLE} WHERE (key ILIKE %s OR value_text ILIKE %s) "
                f"ORDER BY updated_at DESC, id DESC LIMIT {PAGE_LIMIT}"
            )
            hits = conn.execute(
                f"SELECT count(*) FROM {TABLE} WHERE key ILIKE %s OR value_text ILIKE %s", [pattern, pattern]
            ).fetchone()[0]
            plan_with = [
                r[0] for r in conn.execute("EXPLAIN (ANALYZE, BUFFERS) " + query, [pattern, pattern])
            ]
            with_times = []
            for _ in range(5):
                started = time.perf_counter()
                conn.execute(query, [pattern, pattern]).fetchall()
                with_times.append(time.perf_counter() - started)
            with conn.transaction():
                conn.execute("SET LOCAL enable_bitmapscan = off")
                conn.execute("SET LOCAL enable_indexscan = off")
                plan_without = [
                    r[0] for r in conn.execute("EXPLAIN (ANALYZE, BUFFERS) " + query, [pattern, pattern])
                ]
                without_times = []
                for _ in range(5):
                    started = time.perf_counter()
                    conn.execute(query, [pattern, pattern]).fetchall()
                    without_times.append(time.perf_counter() - started)
            # The per-user search plan, for the profile notes.
            user_plan = [
                r[0]
                for r in conn.execute(
                    "EXPLAIN (ANALYZE, BUFFERS) "
                    + self.raw.sql(
                        f"SELECT {COLS} FROM {TABLE} WHERE {self.raw.visible()} AND "
                        f"(key ILIKE %s OR value_text ILIKE %s) ORDER BY updated_at DESC, id DESC "
                        f"LIMIT {PAGE_LIMIT}"
                    ),
                    [
                        self.typical,
                        self.agent,
                        self.typical,
                        self.agent,
                        f"%{self.common}%",
                        f"%{self.common}%",
                    ],
                )
            ]
        finally:
            conn.close()
        med_with, med_without = percentile(with_times, 50), percentile(without_times, 50)
        self.results["explain"] = {
            "term": self.rare,
            "matching_rows": hits,
            "with_index_ms": med_with * 1000,
            "without_index_ms": med_without * 1000,
            "speedup": med_without / med_with,
            "plan_with_index": plan_with,
            "plan_without_index": plan_without,
            "plan_search_per_user": user_plan,
        }
        log(
            f"admin search '{self.rare}' ({hits} rows): {med_with * 1000:.1f} ms with the index, "
            f"{med_without * 1000:.1f} ms without: x{med_without / med_with:.1f}"
        )

    # Upsert tail: p99.9 over --tail upserts, half new keys, half existing.
    def upsert_tail(self, server: Server | None) -> None:
        n = self.cfg.tail
        if n <= 0:
            return
        from usermemory import services
        from usermemory.services import MemoryWrite

        def pick() -> tuple[str, str, str]:
            return self.new_write() if next(SEQ) % 2 else self.existing_write()

        doors = {
            "raw": self.raw_door(lambda c: self.raw.upsert_many(c, agent=self.agent, writes=[pick()])),
            "service": self.service_door(
                lambda: services.memory_upsert(
                    caller=self.agent_caller,
                    write=MemoryWrite(*pick()[:2], value=self.text(), category="fact", visibility="self"),
                    turn_id=f"turn-{RUN_TAG}-{next(SEQ)}",
                )
            ),
        }
        if server:
            doors["http"] = server.door(
                self.agent_raw_key,
                lambda: (
                    "PUT",
                    "/usermemorystore/memories",
                    dict(zip(("userId", "key", "value"), pick(), strict=True)),
                    {200, 201},
                ),
            )
        for name, door in doors.items():
            phase = drive(door, n=n, concurrency=1, seconds=self.cfg.tail_seconds)
            self.results["tail"][f"{name} (fastupdate=off)" if self.raw.pg else name] = phase.summary()
            log(f"tail {name}: {json.dumps(phase.summary())}")
        if self.raw.pg:  # the trade-off: the same raw upserts with GIN fastupdate on (PostgreSQL's default)
            conn = self.raw.connect()
            try:
                for index in ("memory_key_trgm", "memory_value_trgm"):
                    conn.execute(f"ALTER INDEX {index} SET (fastupdate = on)")
                phase = drive(doors["raw"], n=n, concurrency=1, seconds=self.cfg.tail_seconds)
                self.results["tail"]["raw (fastupdate=on)"] = phase.summary()
                log(f"tail raw fastupdate=on: {json.dumps(phase.summary())}")
            finally:
                for index in ("memory_key_trgm", "memory_value_trgm"):
                    conn.execute(f"ALTER INDEX {index} SET (fastupdate = off)")
                    conn.execute(f"SELECT gin_clean_pending_list('{index}'::regclass)")
                conn.close()

    # Query counts per endpoint, in process (django.test.Client), for a small and a large result.
    def query_counts(self) -> None:
        from django.db import connection
        from django.test import Client
        from django.test.utils import CaptureQueriesContext

        client = Client()
        agent: dict[str, Any] = {
            "HTTP_AUTHORIZATION": f"Bearer {self.agent_raw_key}",
            "HTTP_HOST": "127.0.0.1",
        }
        admin: dict[str, Any] = {
            "HTTP_AUTHORIZATION": f"Bearer {self.admin_raw_key}",
            "HTTP_HOST": "127.0.0.1",
        }
        u, h, qkey = self.typical, self.heavy, f"bench.q.{RUN_TAG}"
        batch = "/usermemorystore/memories/batch"
        checks: dict[str, list[tuple[Any, ...]]] = {
            "recall limit 5 / 50 (heaviest)": [
                ("get", f"/usermemorystore/memories/{h}/visible?order=most_accessed&limit=5", agent),
                ("get", f"/usermemorystore/memories/{h}/visible?order=most_accessed&limit=50", agent),
            ],
            "search per user, limit 5 / 1000": [
                ("get", f"/usermemorystore/memories/{h}/search?q=a&limit=5", agent),
                ("get", f"/usermemorystore/memories/{h}/search?q=a&limit=1000", agent),
            ],
            "admin search, limit 5 / 1000": [
                ("get", f"/v1/memories/search?q={self.common}&limit=5", admin),
                ("get", f"/v1/memories/search?q={self.common}&limit=1000", admin),
            ],
            "list user, limit 5 / 1000 (heaviest)": [
                ("get", f"/usermemorystore/memories/{h}?limit=5", agent),
                ("get", f"/usermemorystore/memories/{h}?limit=1000", agent),
            ],
            "upsert new / existing": [
                ("put", "/usermemorystore/memories", agent, {"userId": u, "key": qkey, "value": "x" * 120}),
                ("put", "/usermemorystore/memories", agent, {"userId": u, "key": qkey, "value": "y" * 120}),
            ],
            "batch of 1 / 20": [
                ("put", batch, agent, [{"userId": u, "key": qkey + "b", "value": "z"}]),
                ("put", batch, agent, [{"userId": u, "key": f"{qkey}.{j}", "value": "z"} for j in range(20)]),
            ],
        }  # fmt: skip
        # The first request of a key records its last use (once a minute) and so drops the key from the
        # process's key cache; the second reads it back into the cache. Make both before counting, so every
        # count below is a steady-state request.
        for headers in (agent, admin):
            for _ in range(2):
                client.get("/v1/agents/me", **headers)
        for name, calls in checks.items():
            counts = []
            for method, path, headers, *body in calls:
                kwargs: dict[str, Any] = dict(headers)
                if body:
                    kwargs |= {"data": json.dumps(body[0]), "content_type": "application/json",
                               "HTTP_X_TURN_ID": f"turn-q-{next(SEQ)}"}  # fmt: skip
                with CaptureQueriesContext(connection) as captured:
                    response = getattr(client, method)(path, **kwargs)
                sizes = (
                    len(response.json())
                    if response.status_code == 200 and isinstance(response.json(), list)
                    else "-"
                )
                counts.append({"status": response.status_code, "queries": len(captured), "items": sizes})
            self.results["queries"][name] = counts
        log(f"query counts: {json.dumps(self.results['queries'])}")

    # Peers: LangGraph PostgresStore (a fourth door of recall and upsert), the Agents SDK's SQLiteSession.
    def open_peers(self) -> None:
        self.lg_store = self.lg_pool = None
        if not (self.cfg.peers and self.raw.pg):
            return
        try:
            from langgraph.store.postgres import PostgresStore
            from psycopg.rows import dict_row
            from psycopg_pool import ConnectionPool
        except ImportError as exc:
            log(f"LangGraph peer skipped: {exc}")
            return
        self.lg_pool = ConnectionPool(
            self.cfg.url,
            min_size=self.cfg.concurrency,
            max_size=self.cfg.concurrency,
            kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
            open=True,
        )
        self.lg_store = PostgresStore(self.lg_pool)

    def lg_value(self) -> dict[str, Any]:
        return {"value": self.text(), "category": "fact", "visibility": "self", "sourceAgentId": self.agent}

    def lg_doors(self) -> dict[str, Door]:
        store = self.lg_store
        if store is None:
            return {}

        def put(make: Callable[[], tuple[str, str, str]]) -> Door:
            def call(_ctx: Any) -> None:
                user, key, _ = make()
                store.put(("memories", user), key, self.lg_value())

            return Door(call=call)

        return {
            "recall most_recent typical": Door(
                call=lambda _c: store.search(("memories", self.typical), limit=RECALL_LIMIT)
            ),
            "recall most_recent heaviest": Door(
                call=lambda _c: store.search(("memories", self.heavy), limit=RECALL_LIMIT)
            ),
            "upsert new key": put(self.new_write),
            "upsert existing key": put(self.existing_write),
        }

    def run_peers(self) -> None:
        if self.lg_store is not None and self.lg_pool is not None:
            store = self.lg_store

            def get_existing(_c: Any) -> None:
                user, key = self._lg_existing()
                store.get(("memories", user), key)

            self.results["peers"]["LangGraph get (one key)"] = self.measure(
                {"langgraph": Door(call=get_existing)}
            )["langgraph"]
            self.lg_pool.close()
        if self.cfg.peers:
            self.sqlite_session()

    def _lg_existing(self) -> tuple[str, str]:
        user, key = self.existing[next(SEQ) % len(self.existing)]
        return user, key

    def sqlite_session(self) -> None:
        try:
            from agents import SQLiteSession
        except ImportError as exc:
            log(f"SQLiteSession skipped: {exc}")
            return
        with tempfile.TemporaryDirectory() as tmp:
            session = SQLiteSession("bench-conversation", Path(tmp) / "session.sqlite3")

            async def go() -> Phase:
                phase = Phase()
                started_all = time.perf_counter()
                for i in range(self.cfg.n + self.cfg.warmup):
                    item: Any = {"role": "user" if i % 2 else "assistant", "content": self.text()}
                    started = time.perf_counter()
                    await session.add_items([item])
                    if i >= self.cfg.warmup:
                        phase.latencies.append(time.perf_counter() - started)
                phase.wall = time.perf_counter() - started_all
                await session.get_items(limit=RECALL_LIMIT)
                return phase

            phase = asyncio.run(go())
            session.close()
        self.results["peers"]["Agents SDK SQLiteSession append (file)"] = {"c1": phase.summary()}
        log(f"SQLiteSession append: {json.dumps(phase.summary())}")


# --- Report ---------------------------------------------------------------------------------------


def fmt(value: float, digits: int = 2) -> str:
    return "-" if value != value else f"{value:.{digits}f}"  # noqa: PLR0124 (NaN check)


def report(results: dict[str, Any]) -> str:
    lines = []
    c = results["settings"]["concurrency"]
    lines.append(
        f"| operation | door | p50 ms (1 client) | p99 ms (1 client) | req/s ({c} clients) | p50 ms ({c}) "
        f"| p99 ms ({c}) | http/raw req/s | service-raw p50 ms | service/raw p50 | errors |"
    )
    lines.append("|" + "---|" * 11)
    for name, doors in results["ops"].items():
        raw = doors.get("raw")
        for door, v in doors.items():
            ratio_http = ratio_svc = delta = "-"
            if raw and door == "http" and raw["cN"]["rps"]:  # a door with no successful call has no ratio
                ratio_http = fmt(v["cN"]["rps"] / raw["cN"]["rps"])
            if raw and door == "service" and raw["c1"]["rps"]:
                delta = fmt(v["c1"]["p50_ms"] - raw["c1"]["p50_ms"])
                ratio_svc = fmt(v["c1"]["p50_ms"] / raw["c1"]["p50_ms"])
            errors = v["c1"]["errors"] + v["cN"]["errors"]
            lines.append(
                f"| {name} | {door} | {fmt(v['c1']['p50_ms'])} | {fmt(v['c1']['p99_ms'])} | {fmt(v['cN']['rps'], 0)} "  # noqa: E501
                f"| {fmt(v['cN']['p50_ms'])} | {fmt(v['cN']['p99_ms'])} | {ratio_http} | {delta} | {ratio_svc} | {errors} |"  # noqa: E501
            )
    if results["peers"]:
        head = (
            f"| peer operation | p50 ms (1 client) | p99 ms | req/s ({c} clients) | p50 ms ({c}) | p99 ms |"
        )
        lines += ["", head,
                  "|---|---|---|---|---|---|"]  # fmt: skip
        for name, v in results["peers"].items():
            cn = v.get("cN", {})
            lines.append(
                f"| {name} | {fmt(v['c1']['p50_ms'])} | {fmt(v['c1']['p99_ms'])} | {fmt(cn.get('rps', float('nan')), 0)} "  # noqa: E501
                f"| {fmt(cn.get('p50_ms', float('nan')))} | {fmt(cn.get('p99_ms', float('nan')))} |"
            )
    if results["tail"]:
        lines += [
            "",
            "| upsert tail (1 client) | n | p50 ms | p99 ms | p99.9 ms | max ms | errors |",
            "|---|---|---|---|---|---|---|",
        ]
        for name, v in results["tail"].items():
            lines.append(
                f"| {name} | {v['n']} | {fmt(v['p50_ms'])} | {fmt(v['p99_ms'])} | {fmt(v['p999_ms'])} "
                f"| {fmt(v['max_ms'])} | {v['errors']} |"
            )
    if results["explain"]:
        e = results["explain"]
        lines += [
            "",
            f"admin search '{e['term']}' ({e['matching_rows']} matching rows): "
            f"{fmt(e['with_index_ms'])} ms with "
            f"the trigram index, {fmt(e['without_index_ms'])} ms without: x{fmt(e['speedup'], 1)}",
        ]
    for name, doors in results["ops"].items():
        for door, v in doors.items():
            for label in ("c1", "cN"):
                if v[label]["errors"]:
                    lines.append(f"ERROR {name} / {door} / {label}: {v[label]['first_error']}")
    if results.get("targets"):
        lines += ["", "targets:"] + [
            f"- [{'met' if ok else 'NOT met'}] {text}" for text, ok in results["targets"]
        ]
    return "\n".join(lines)


def targets(results: dict[str, Any]) -> list[tuple[str, bool]]:
    ops, out = results["ops"], []
    for name, doors in ops.items():
        if "raw" not in doors or "http" not in doors or not doors["raw"]["cN"]["rps"]:
            continue
        ratio = doors["http"]["cN"]["rps"] / doors["raw"]["cN"]["rps"]
        if name.startswith("recall") or name.startswith("upsert"):
            out.append((f"{name}: http throughput {ratio:.0%} of raw (>= 35 %)", ratio >= 0.35))
        if name.startswith("recall"):
            delta = doors["service"]["c1"]["p50_ms"] - doors["raw"]["c1"]["p50_ms"]
            out.append(
                (f"{name}: service adds {delta:.2f} ms to raw at the median (<= 0.5 ms)", delta <= 0.5)
            )
    search = ops.get("search per user (typical)", {}).get("service")
    if search:
        out.append(
            (
                f"search per user: service median {search['c1']['p50_ms']:.2f} ms (< 2 ms)",
                search["c1"]["p50_ms"] < 2,
            )
        )
    if results["explain"]:
        s = results["explain"]["speedup"]
        out.append((f"admin search: x{s:.1f} faster with the trigram index (>= 10x)", s >= 10))
    for name, doors in ops.items():
        if "langgraph" in doors and "http" in doors:
            h, p = doors["http"], doors["langgraph"]
            out.append((
                f"{name}: our http vs LangGraph PostgresStore in process: p50 {h['c1']['p50_ms']:.2f} vs "
                f"{p['c1']['p50_ms']:.2f} ms, {h['cN']['rps']:.0f} vs {p['cN']['rps']:.0f} req/s",
                h["c1"]["p50_ms"] < p["c1"]["p50_ms"] and h["cN"]["rps"] > p["cN"]["rps"],
            ))  # fmt: skip
    for name, v in results["tail"].items():
        if "fastupdate=on" not in name:
            out.append(
                (
                    f"upsert tail {name}: p99.9 {v['p999_ms']:.1f} ms over {v['n']} (<= 50 ms)",
                    v["p999_ms"] <= 50,
                )
            )
    for name, counts in results["queries"].items():
        if "batch" in name or "upsert" in name:
            continue
        same = len({c["queries"] for c in counts}) == 1
        out.append(
            (
                f"queries {name}: {[c['queries'] for c in counts]} for {[c['items'] for c in counts]} items",
                same,
            )
        )
    return out


# --- Entry points ---------------------------------------------------------------------------------


def run(cfg: Settings, out: str | None) -> int:
    os.environ["DATABASE_URL"] = cfg.url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryplatform.settings")
    os.environ.setdefault("DEBUG", "false")
    import django

    django.setup()
    from django.db import connection

    bench = Bench(cfg)
    bench.prepare()
    bench.open_peers()
    started = time.time()
    server = Server(cfg.url, Path(tempfile.gettempdir()) / f"bench-serve-{RUN_TAG}.log")
    try:
        server.start()
        bench.run_ops(server)
        if not cfg.only:
            bench.explain_admin_search()
            bench.upsert_tail(server)
    finally:
        server.stop()
    bench.query_counts()
    bench.run_peers()
    connection.close()
    results = bench.results
    results["settings"] = {
        "database": "postgresql" if bench.raw.pg else "sqlite",
        "url": cfg.url,
        "n_single_client": cfg.n,
        "concurrency": cfg.concurrency,
        "seconds_per_phase": cfg.seconds,
        "tail": cfg.tail,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cpus, Python {platform.python_version()}",
        "duration_s": round(time.time() - started, 1),
        "command": " ".join(sys.argv),
    }
    results["targets"] = targets(results)
    text = report(results)
    print(text, flush=True)
    if out:
        Path(out).write_text(json.dumps(results, indent=1, default=str))
        log(f"results written to {out}")
    errors = sum(
        v[p]["errors"] for doors in results["ops"].values() for v in doors.values() for p in ("c1", "cN")
    )
    errors += sum(v["errors"] for v in results["tail"].values())
    return 1 if errors else 0


def smoke() -> int:
    """A few hundred memories on SQLite (and on PostgreSQL when DATABASE_URL names one), every operation a few
    times. The PostgreSQL pass uses its own database, ``bench_smoke``, on that server, and drops it after."""
    started = time.time()
    urls = []
    tmp = tempfile.mkdtemp(prefix="bench-smoke-")
    urls.append(f"sqlite:///{tmp}/smoke.sqlite3")
    pg = os.environ.get("DATABASE_URL", "")
    if is_postgres(pg):
        urls.append(urlparse(pg)._replace(path="/bench_smoke").geturl())
    try:
        import agents  # noqa: F401
        import langgraph.store.postgres  # noqa: F401

        peers = True
    except ImportError:
        peers = False
    status = 0
    for url in urls:
        env = os.environ | {"DATABASE_URL": url}
        load = [sys.executable, "-m", "bench.load", "--reset", "--memories", "400", "--users", "100",
                "--agents", "6"]  # fmt: skip
        if peers and is_postgres(url):
            load.append("--peers")
        bench = [sys.executable, "-m", "bench.run", "--n", "3", "--concurrency", "2", "--seconds", "0.3",
                 "--tail", "10", "--tail-seconds", "5", "--erase-n", "1", "--warmup", "1"]  # fmt: skip
        bench += [] if peers else ["--no-peers"]
        for cmd in (load, bench):
            log(f"smoke ({'postgresql' if is_postgres(url) else 'sqlite'}): {' '.join(cmd[1:])}")
            done = subprocess.run(cmd, cwd=ROOT, env=env, check=False)  # noqa: S603
            if done.returncode:
                log(f"smoke FAILED: exit {done.returncode}")
                status = 1
                break
        if is_postgres(url):
            import psycopg

            with psycopg.connect(urlparse(url)._replace(path="/postgres").geturl(), autocommit=True) as conn:
                conn.execute('DROP DATABASE IF EXISTS "bench_smoke" WITH (FORCE)')
    for name in os.listdir(tmp):
        os.remove(os.path.join(tmp, name))
    os.rmdir(tmp)
    log(f"smoke {'passed' if status == 0 else 'FAILED'} in {time.time() - started:.1f}s")
    return status


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--smoke", action="store_true", help="tiny run on throwaway databases; exit 0 when all pass"
    )
    parser.add_argument("--db-url", default=os.environ.get("DATABASE_URL", ""))
    parser.add_argument("--n", type=int, default=300, help="calls per door with one client (latency)")
    parser.add_argument("--concurrency", type=int, default=4, help="clients for the throughput phase")
    parser.add_argument("--seconds", type=float, default=8.0, help="time limit of each phase")
    parser.add_argument(
        "--tail", type=int, default=10_000, help="upserts per door for the p99.9 tail (0: skip)"
    )
    parser.add_argument(
        "--erase-n", type=int, default=20, help="erasures per door and phase (each erases a user)"
    )
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--tail-seconds", type=float, default=120.0, help="time limit of each tail run")
    parser.add_argument("--only", default="", help="run only the operations whose name contains this")
    parser.add_argument("--no-peers", dest="peers", action="store_false")
    parser.add_argument("--out", help="write the results as JSON here")
    args = parser.parse_args(argv)
    if args.smoke:
        return smoke()
    if not args.db_url:
        raise SystemExit("Set DATABASE_URL or --db-url to a database filled by `python -m bench.load`.")
    cfg = Settings(
        url=args.db_url,
        n=args.n,
        concurrency=args.concurrency,
        seconds=args.seconds,
        tail=args.tail,
        erase_n=args.erase_n,
        peers=args.peers,
        warmup=args.warmup,
        tail_seconds=args.tail_seconds,
        only=args.only,
    )
    return run(cfg, args.out)


if __name__ == "__main__":
    sys.exit(main())
