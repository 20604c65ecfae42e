"""Load the benchmark data set: migrate, make agents and groups through the platform's services, then COPY.

    env -u DATABASE_URL .venv/bin/python -m bench.load --reset --memories 1000000 --users 10000 --agents 50
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench .venv/bin/python -m bench.load --reset [--peers] ...

Without DATABASE_URL the database is ``bench`` in the embedded server of DATA_DIR (``bench/target.py``);
it is created when missing, and ``--reset`` drops and re-creates it.

The secondary indexes of the two memory tables are dropped, the rows COPYed with
``session_replication_role = replica`` (no per-row FK triggers; the data is consistent by construction), the
indexes rebuilt from their own definitions (the GIN ones on a second connection, in parallel), then VACUUM
ANALYZE. ``--peers`` also fills LangGraph's ``PostgresStore`` table (``store``, namespace
``("memories", userId)``) in the same database with the same memories. Every memory gets a vector
(``bench/vectors.py``: the generator's words embedded once, an entry's vector their mean) unless
``--no-vectors``.
"""

import argparse
import json
import os
import sys
import threading
import time

import psycopg

from bench import data, target

ENTRY_COLUMNS = (
    "id, user_id, key, value, value_text, key_folded, text_folded, category, visibility, source_agent_id, "
    "group_ids, source_conversation_id, conflicted, access_count, created_at, updated_at, last_accessed_at"
)
MEMORY_TABLES = ("usermemory_memoryentry", "usermemory_memoryentrygroup")


def log(message: str) -> None:
    print(f"[load {time.strftime('%H:%M:%S')}] {message}", flush=True)


def migrate_and_make_agents(n_agents: int) -> None:
    """Run migrations, then register the agents and their groups through the platform's services."""
    from django.core.management import call_command

    from apikeys.models import Agent
    from apikeys.services import agent_create

    call_command("migrate", verbosity=0, interactive=False)
    existing = set(Agent.objects.values_list("id", flat=True))
    for agent, groups in data.agent_groups(n_agents).items():
        if agent not in existing:
            agent_create(agent_id=agent, display_name=f"bench {agent}", group_ids=groups)


def _entry_row(m: data.Memory) -> tuple:
    return (
        m.id,
        m.user_id,
        m.key,
        m.value_json,
        m.text,
        m.key.casefold(),
        m.text.casefold(),
        m.category,
        m.visibility,
        m.source_agent_id,
        json.dumps(m.group_ids),
        m.source_conversation_id,
        False,
        m.access_count,
        m.created_at,
        m.updated_at,
        m.last_accessed_at,
    )


def load_memories(url: str, args: argparse.Namespace) -> dict[str, float]:
    timings: dict[str, float] = {}
    with psycopg.connect(url, autocommit=True) as conn:
        (count,) = conn.execute("SELECT count(*) FROM usermemory_memoryentry").fetchone() or (0,)
        if count:
            raise SystemExit("usermemory_memoryentry is not empty: pass --reset")
        indexes = conn.execute(
            "SELECT i.indexname, i.indexdef FROM pg_indexes i WHERE i.tablename = ANY(%s) "
            "AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conname = i.indexname)",
            [list(MEMORY_TABLES)],
        ).fetchall()
        started = time.perf_counter()
        for name, _ in indexes:
            conn.execute(f'DROP INDEX "{name}"')
        conn.execute("SET session_replication_role = replica")
        entries = groups = 0
        with (
            conn.cursor() as cur,
            cur.copy(f"COPY usermemory_memoryentry ({ENTRY_COLUMNS}) FROM STDIN") as copy,
        ):
            group_rows: list[tuple] = []
            for m in data.memories(n_memories=args.memories, n_users=args.users, n_agents=args.agents):
                copy.write_row(_entry_row(m))
                entries += 1
                group_rows.extend((m.id, m.user_id, g) for g in m.group_ids)
        with (
            conn.cursor() as cur,
            cur.copy("COPY usermemory_memoryentrygroup (entry_id, user_id, group_id) FROM STDIN") as copy,
        ):
            for row in group_rows:
                copy.write_row(row)
                groups += 1
        conn.execute("SET session_replication_role = DEFAULT")
        for table in MEMORY_TABLES:
            conn.execute(
                f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                f"(SELECT coalesce(max(id), 1) FROM {table}))"
            )
        timings["copy_s"] = time.perf_counter() - started
        log(f"COPY: {entries} entries, {groups} group rows in {timings['copy_s']:.1f}s")

        started = time.perf_counter()
        # The GIN indexes (slow to build) on their own connection, every other one on this one, side by side.
        heavy = [d for _, d in indexes if " USING gin " in d]
        light = [d for _, d in indexes if " USING gin " not in d]

        def build(defs: list[str]) -> None:
            with psycopg.connect(url, autocommit=True) as c:
                c.execute("SET maintenance_work_mem = '1GB'")
                c.execute("SET max_parallel_maintenance_workers = 1")
                for definition in defs:
                    c.execute(definition)

        worker = threading.Thread(target=build, args=(heavy,))
        worker.start()
        build(light)
        worker.join()
        timings["indexes_s"] = time.perf_counter() - started
        log(f"{len(indexes)} indexes rebuilt in {timings['indexes_s']:.1f}s")
        started = time.perf_counter()
        for table in MEMORY_TABLES:
            conn.execute(f"VACUUM (ANALYZE) {table}")
        timings["vacuum_analyze_s"] = time.perf_counter() - started
        log(f"VACUUM ANALYZE in {timings['vacuum_analyze_s']:.1f}s")
    return timings


def load_peers(url: str, args: argparse.Namespace) -> dict[str, float]:
    """LangGraph's PostgresStore (no vector index): its own ``store`` table, the same memories."""
    from langgraph.store.postgres import PostgresStore

    started = time.perf_counter()
    with PostgresStore.from_conn_string(url) as store:
        store.setup()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("TRUNCATE store")
        with (
            conn.cursor() as cur,
            cur.copy("COPY store (prefix, key, value, created_at, updated_at) FROM STDIN") as copy,
        ):
            for m in data.memories(n_memories=args.memories, n_users=args.users, n_agents=args.agents):
                value = {
                    "value": m.text,
                    "category": m.category,
                    "visibility": m.visibility,
                    "sourceAgentId": m.source_agent_id,
                    "groupIds": m.group_ids,
                }
                copy.write_row(
                    (f"memories.{m.user_id}", m.key, json.dumps(value), m.created_at, m.updated_at)
                )
        conn.execute("VACUUM (ANALYZE) store")
    elapsed = time.perf_counter() - started
    log(f"LangGraph PostgresStore: {args.memories} items in {elapsed:.1f}s")
    return {"peers_s": elapsed}


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--db-url", default=os.environ.get("DATABASE_URL", ""), help="default: the embedded server's bench"
    )
    parser.add_argument("--memories", type=int, default=1_000_000)
    parser.add_argument("--users", type=int, default=10_000)
    parser.add_argument("--agents", type=int, default=50)
    parser.add_argument("--reset", action="store_true", help="drop and re-create the database first")
    parser.add_argument("--peers", action="store_true", help="also load LangGraph's PostgresStore table")
    parser.add_argument(
        "--no-vectors",
        dest="vectors",
        action="store_false",
        help="no entry vectors (by default every memory gets one: bench/vectors.py says how)",
    )
    args = parser.parse_args(argv)
    total = time.perf_counter()
    db = target.resolve(args.db_url)
    log(f"database {db.name} ({'embedded server of ' + str(target.data_dir()) if db.embedded else db.url})")
    target.create(db, reset=args.reset)
    target.django_setup(db)
    started = time.perf_counter()
    migrate_and_make_agents(args.agents)
    timings = {"migrate_agents_s": time.perf_counter() - started}
    log(f"migrated, {args.agents} agents in {timings['migrate_agents_s']:.1f}s")
    timings |= load_memories(db.conninfo, args)
    if args.vectors:
        from bench.vectors import load_vectors

        timings |= load_vectors(
            db.conninfo, n_memories=args.memories, n_users=args.users, n_agents=args.agents
        )
        log(
            f"{int(timings['vectors'])} vectors: words embedded in {timings['embed_words_s']:.1f}s, "
            f"COPY in {timings['copy_vectors_s']:.1f}s, VACUUM ANALYZE in {timings['vacuum_vectors_s']:.1f}s"
        )
    if args.peers:
        timings |= load_peers(db.conninfo, args)
    timings["total_s"] = time.perf_counter() - total
    log(f"done in {timings['total_s']:.1f}s: {json.dumps({k: round(v, 1) for k, v in timings.items()})}")
    return timings


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
