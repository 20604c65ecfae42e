"""The scenario: set-up (keys, callers, users), each operation's doors side by side, the upsert tail, the
search plans, the peers. ``bench/run.py`` drives it."""

import itertools
import json
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from psycopg import sql

from bench import data, raw_sql
from bench.http_door import Server
from bench.measure import RUN_TAG, SEQ, Door, Phase, drive, log
from bench.peers import LangGraphPeer, sqlite_session_append
from bench.queries import query_counts
from bench.raw import Raw
from bench.raw_sql import PAGE_LIMIT, RECALL_LIMIT
from bench.target import Target

if TYPE_CHECKING:
    from usermemory.services import MemoryWrite

MEANING_LIMIT = 10  # recall by meaning: the top 10, the context of a turn


def _write_of(user: str, key: str, text: str) -> "MemoryWrite":
    """An upsert through the service."""
    from usermemory.services import MemoryWrite

    return MemoryWrite(user_id=user, key=key, value=text, category="fact", visibility="self")


def _body_of(user: str, key: str, text: str) -> dict[str, Any]:
    """An upsert through HTTP."""
    return {"userId": user, "key": key, "value": text, "category": "fact", "visibility": "self"}


@dataclass
class Settings:
    db: Target
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
        self.raw = Raw(cfg.db.conninfo)
        self.lg: LangGraphPeer | None = None
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
        users, pairs, texts = self.read_data(agent)
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
        self.pick_search_terms(texts)
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

    def read_data(self, agent: str) -> tuple[list[str], list[tuple[str, str]], list[str]]:
        """The agent's groups, the users by size (the typical and the heaviest one, the pools of users to
        erase and to write to), the data set's size; returns the users, the agent's own keys in the write
        users' entries and the typical user's texts."""
        conn = self.raw.connect()
        try:
            self.groups = [r[0] for r in self.raw.rows(conn, raw_sql.AGENT_GROUPS, {"agent": agent})]
            sizes = self.raw.rows(conn, raw_sql.USER_SIZES, {})
            users = [u for u, _ in sizes]
            self.heavy, self.heavy_size = sizes[-1]
            self.typical, self.typical_size = sizes[len(sizes) // 2]
            rest = [u for u in users[len(users) // 5 : -max(1, len(users) // 20)] if u != self.typical]
            needed = 3 * (self.cfg.warmup + 3 * self.cfg.erase_n) + 3  # three doors, three phases each
            self.erase_pool = rest[:: max(2, len(rest) // needed)][:needed]
            # A small data set has fewer users to erase than asked for: fewer erasures, not an empty pool.
            self.erase_n = max(1, min(self.cfg.erase_n, (len(self.erase_pool) // 3 - self.cfg.warmup) // 3))
            if self.erase_n < self.cfg.erase_n:
                log(f"erasures per door and phase: {self.erase_n} (not {self.cfg.erase_n}): too few users")
            erased = set(self.erase_pool)
            self.write_users = [u for u in rest if u not in erased][:2000] or [self.typical]
            pairs = [
                (user, key)
                for user, key in self.raw.rows(
                    conn, raw_sql.AGENT_OWN_KEYS, {"agent": agent, "users": self.write_users}
                )
            ]
            self.total = self.raw.rows(conn, raw_sql.COUNT_ENTRIES, {})[0][0]
            texts = [r[0] for r in self.raw.rows(conn, raw_sql.USER_TEXTS, {"user": self.typical})]
        finally:
            conn.close()
        return users, pairs, texts

    def pick_search_terms(self, texts: list[str]) -> None:
        """Per-user search: a word of 5+ letters found in about 8 % of the typical user's entries.
        Admin search: a rare word (about 0.1 % of all values)."""
        counts: dict[str, int] = {}
        for text in texts:
            for word in set(text.split()):
                if len(word) >= 5:
                    counts[word] = counts.get(word, 0) + 1
        target = max(2.0, 0.08 * len(texts))
        self.common = min(sorted(counts), key=lambda w: abs(counts[w] - target)) if counts else "bada"
        self.rare = data.search_terms()[1]

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
        """Each operation's doors, in the order they are measured and reported."""
        ops: dict[str, dict[str, Door | None]] = {}
        for label, user in (("typical", self.typical), ("heaviest", self.heavy)):
            for order in ("most_recent", "most_accessed"):
                ops[f"recall {order} {label}"] = self.recall_doors(server, user, order)
        for label, make in (("new key", self.new_write), ("existing key", self.existing_write)):
            ops[f"upsert {label}"] = self.upsert_doors(server, make)
        ops["batch upsert of 20"] = self.batch_upsert_doors(server)
        ops["search per user (typical)"] = self.search_doors(server)
        # Recall by meaning (issue 18): a question in words of the data set, its top 10, the query's
        # embedding included. No raw door: the ranked statement is the platform's (usermemory/sql/search.py).
        question = f"what did the user say about {self.common}?"
        for label, who in (("typical", self.typical), ("heaviest", self.heavy)):
            for mode in ("hybrid", "semantic"):
                ops[f"search by meaning {mode} {label}"] = self.meaning_doors(server, who, mode, question)
        ops["admin search, all users"] = self.admin_search_doors(server)
        self.erase_counter = itertools.count()
        ops["GDPR erasure of one user"] = self.erase_doors(server)
        ops["conversation append (1 message)"] = self.append_doors(server)
        if server:  # what any request costs through the server and Django, before the platform does a thing
            ops["http floor: GET /healthz (no key, no query)"] = {
                "http": server.door(self.agent_raw_key, lambda: ("GET", "/healthz", None, {200}))
            }
        if self.lg is not None:
            lg_doors = self.lg.doors(
                typical=self.typical,
                heavy=self.heavy,
                new_write=self.new_write,
                existing_write=self.existing_write,
                value=self.lg_value,
            )
            for name, door in lg_doors.items():
                ops[name]["langgraph"] = door
        return ops

    @staticmethod
    def http_door(
        server: Server | None, key: str, request: Callable[[], tuple[str, str, Any, set[int]]]
    ) -> Door | None:
        """The HTTP door of an operation, when the bench serves one."""
        return server.door(key, request) if server else None

    def recall_doors(self, server: Server | None, user: str, order: str) -> dict[str, Door | None]:
        from usermemory import services

        raw, agent = self.raw, self.agent
        path = f"/usermemorystore/memories/{user}/visible?order={order}&limit={RECALL_LIMIT}"
        return {
            "raw": self.raw_door(lambda c: raw.recall(c, user=user, agent=agent, order=order)),
            "service": self.service_door(
                lambda: services.memory_recall(
                    caller=self.agent_caller, user_id=user, order=order, limit=RECALL_LIMIT
                )
            ),
            "http": self.http_door(server, self.agent_raw_key, lambda: ("GET", path, None, {200})),
        }

    def upsert_doors(
        self, server: Server | None, make: Callable[[], tuple[str, str, str]]
    ) -> dict[str, Door | None]:
        from usermemory import services

        raw, agent = self.raw, self.agent
        return {
            "raw": self.raw_door(lambda c: raw.upsert_many(c, agent=agent, writes=[make()])),
            "service": self.service_door(
                lambda: services.memory_upsert(
                    caller=self.agent_caller,
                    write=_write_of(*make()),
                    turn_id=f"turn-{RUN_TAG}-{next(SEQ)}",
                )
            ),
            "http": self.http_door(
                server,
                self.agent_raw_key,
                lambda: ("PUT", "/usermemorystore/memories", _body_of(*make()), {200, 201}),
            ),
        }

    def batch_upsert_doors(self, server: Server | None) -> dict[str, Door | None]:
        from usermemory import services

        raw, agent = self.raw, self.agent
        return {
            "raw": self.raw_door(lambda c: raw.upsert_many(c, agent=agent, writes=self.batch_writes())),
            "service": self.service_door(
                lambda: services.memory_upsert_batch(
                    caller=self.agent_caller,
                    writes=[_write_of(*w) for w in self.batch_writes()],
                    turn_id=f"turn-{RUN_TAG}-{next(SEQ)}",
                )
            ),
            "http": self.http_door(
                server,
                self.agent_raw_key,
                lambda: (
                    "PUT",
                    "/usermemorystore/memories/batch",
                    [_body_of(*w) for w in self.batch_writes()],
                    {200},
                ),
            ),
        }

    def search_doors(self, server: Server | None) -> dict[str, Door | None]:
        """The typical user's search for a common word (keyword: a literal substring)."""
        from usermemory import selectors

        raw, agent, user, q = self.raw, self.agent, self.typical, self.common
        return {
            "raw": self.raw_door(lambda c: raw.search(c, query=q, user=user, agent=agent)),
            "service": self.service_door(
                lambda: selectors.memory_search(
                    caller=self.agent_caller, user_id=user, query=q, limit=PAGE_LIMIT
                )
            ),
            "http": self.http_door(
                server,
                self.agent_raw_key,
                lambda: ("GET", f"/usermemorystore/memories/{user}/search?q={quote(q)}", None, {200}),
            ),
        }

    def admin_search_doors(self, server: Server | None) -> dict[str, Door | None]:
        """The admin's full-text search across all users for a rare word."""
        from usermemory import selectors

        raw, agent, rare = self.raw, self.agent, self.rare
        return {
            "raw": self.raw_door(lambda c: raw.search(c, query=rare, user=None, agent=agent)),
            "service": self.service_door(
                lambda: list(
                    selectors.memory_search_all_users(caller=self.admin_caller, query=rare)[:PAGE_LIMIT]
                )
            ),
            "http": self.http_door(
                server,
                self.admin_raw_key,
                lambda: ("GET", f"/v1/memories/search?q={quote(rare)}", None, {200}),
            ),
        }

    def erase_doors(self, server: Server | None) -> dict[str, Door | None]:
        """Each call erases the next user of the erase pool (``erase_counter``)."""
        from usermemory import services

        return {
            "raw": self.raw_door(lambda c: self.raw.erase(c, self.next_erase_user())),
            "service": self.service_door(
                lambda: services.memory_erase_user(caller=self.admin_caller, user_id=self.next_erase_user())
            ),
            "http": self.http_door(
                server,
                self.admin_raw_key,
                lambda: ("DELETE", f"/usermemorystore/memories/{self.next_erase_user()}", None, {200}),
            ),
        }

    def append_doors(self, server: Server | None) -> dict[str, Door | None]:
        """One message appended to each door's own conversation."""
        from conversations import services as conversation_services
        from conversations.services import MessageWrite

        conversations = self.conversations

        def message_of(text: str) -> MessageWrite:
            return MessageWrite(
                channel="history", role="user", content=[{"type": "text", "text": text}], session_id="bench"
            )

        return {
            "raw": self.raw_door(lambda c: self.raw.append_message(c, conversations["raw"], self.text())),
            "service": self.service_door(
                lambda: conversation_services.message_append(
                    caller=self.agent_caller,
                    conversation_id=conversations["service"],
                    writes=[message_of(self.text())],
                )
            ),
            "http": self.http_door(
                server,
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
            ),
        }

    def meaning_doors(
        self, server: Server | None, user: str, mode: str, question: str
    ) -> dict[str, Door | None]:
        """The per-user search in a ranked mode (semantic, hybrid), top 10, through the service and HTTP."""
        from usermemory import selectors

        path = (
            f"/usermemorystore/memories/{user}/search?q={quote(question)}&mode={mode}&limit={MEANING_LIMIT}"
        )
        return {
            "raw": None,
            "service": self.service_door(
                lambda: selectors.memory_search(
                    caller=self.agent_caller, user_id=user, query=question, mode=mode, limit=MEANING_LIMIT
                )
            ),
            "http": self.http_door(server, self.agent_raw_key, lambda: ("GET", path, None, {200})),
        }

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
                entry = self.measure(present, n=self.erase_n, loaded_n=2 * self.erase_n, rounds=1)
            else:
                entry = self.measure(present)
            self.results["ops"][name] = entry
            log(
                f"{name}: "
                + "  ".join(
                    f"{d} p50 {v['c1']['p50_ms']:.2f}ms {v['cN']['rps']:.0f}/s" for d, v in entry.items()
                )
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
            self.results["tail"][name] = phase.summary()
            log(f"tail {name}: {json.dumps(phase.summary())}")

    # The search statements' plans (the raw door's), for the profile notes: per user, and the admin's.
    def explain_searches(self) -> None:
        conn = self.raw.connect()
        try:
            tsquery = {"tsquery": raw_sql.fulltext_terms(self.rare), "limit": PAGE_LIMIT}

            def plan(statement: sql.Composed, params: dict[str, Any]) -> list[str]:
                return [
                    r[0] for r in conn.execute(sql.SQL("EXPLAIN (ANALYZE, BUFFERS) ") + statement, params)
                ]

            hits = len(self.raw.rows(conn, raw_sql.SEARCH_ALL_USERS, tsquery))
            all_users = plan(raw_sql.SEARCH_ALL_USERS, tsquery)
            per_user = plan(
                raw_sql.SEARCH_PER_USER,
                {
                    "user": self.typical,
                    "agent": self.agent,
                    "folded": self.common.casefold(),
                    "limit": PAGE_LIMIT,
                },
            )
        finally:
            conn.close()
        self.results["explain"] = {
            "term": self.rare,
            "matching_rows": hits,  # at most a page
            "plan_search_all_users": all_users,
            "plan_search_per_user": per_user,
        }
        log(f"admin search '{self.rare}': {hits} rows; plans recorded")

    def query_counts(self) -> None:
        self.results["queries"] = query_counts(
            agent_key=self.agent_raw_key,
            admin_key=self.admin_raw_key,
            typical=self.typical,
            heavy=self.heavy,
            term=self.common,
        )

    # Peers: LangGraph PostgresStore (a fourth door of recall and upsert), the Agents SDK's SQLiteSession.
    def open_peers(self) -> None:
        if self.cfg.peers:
            self.lg = LangGraphPeer.open(self.cfg.db.conninfo, self.cfg.concurrency)

    def lg_value(self) -> dict[str, Any]:
        return {"value": self.text(), "category": "fact", "visibility": "self", "sourceAgentId": self.agent}

    def run_peers(self) -> None:
        if self.lg is not None:
            get = self.lg.get_door(lambda: self.existing[next(SEQ) % len(self.existing)])
            self.results["peers"]["LangGraph get (one key)"] = self.measure({"langgraph": get})["langgraph"]
            self.lg.close()
        if self.cfg.peers:
            phase = sqlite_session_append(n=self.cfg.n, warmup=self.cfg.warmup, text=self.text)
            if phase is not None:
                self.results["peers"]["Agents SDK SQLiteSession append (file)"] = {"c1": phase.summary()}
                log(f"SQLiteSession append: {json.dumps(phase.summary())}")
