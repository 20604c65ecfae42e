"""The exact cosine scan alone, on the data ``bench.load`` left: how long pgvector takes to rank the vector
table's rows by distance to one query, whatever type the column is (``vector`` or ``halfvec``).

    DATA_DIR=... env -u DATABASE_URL .venv/bin/python -m bench.vector_scan [--repeat 30] [--db-url URL]

Two statements, each run ``--repeat`` times after one unmeasured run (the table is then in shared buffers
when it fits): the top 10 of the whole table (every row's distance: the cost a search over everything would
have), and the top 10 of the heaviest user's rows (the ranked search's own shape, as ``bench.run`` measures
it through the doors). The query is the first entry's stored vector, as a ``vector`` literal (as the search
passes it). Prints the column's type, the table's size, and p50/p95 of each in ms.
"""

import argparse
import json
import statistics
import time

import psycopg

from bench import target

TABLE = "usermemory_entryembedding"
FACTS = f"""SELECT format_type(atttypid, atttypmod), pg_total_relation_size('{TABLE}'),
    (SELECT count(*) FROM {TABLE})
    FROM pg_attribute WHERE attrelid = '{TABLE}'::regclass AND attname = 'embedding'"""
QUERY = f"SELECT embedding::text FROM {TABLE} ORDER BY entry_id LIMIT 1"
HEAVIEST = (
    "SELECT user_id FROM usermemory_memoryentry GROUP BY user_id ORDER BY count(*) DESC, user_id LIMIT 1"
)
ALL_ROWS = f"SELECT entry_id FROM {TABLE} ORDER BY embedding <=> %(q)s::vector LIMIT 10"
ONE_USER = f"""SELECT e.entry_id FROM usermemory_memoryentry m JOIN {TABLE} e ON e.entry_id = m.id
    WHERE m.user_id = %(user)s ORDER BY e.embedding <=> %(q)s::vector LIMIT 10"""


def timed(conn: psycopg.Connection, statement: str, params: dict[str, str], repeat: int) -> dict[str, float]:
    conn.execute(statement, params).fetchall()  # warm-up
    seconds = []
    for _ in range(repeat):
        started = time.perf_counter()
        conn.execute(statement, params).fetchall()
        seconds.append(time.perf_counter() - started)
    p95 = statistics.quantiles(seconds, n=20)[-1] if len(seconds) > 1 else seconds[0]
    return {
        "p50_ms": statistics.median(seconds) * 1000,
        "p95_ms": p95 * 1000,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--db-url", default="")
    args = parser.parse_args(argv)
    db = target.resolve(args.db_url)
    with psycopg.connect(db.conninfo, autocommit=True) as conn:
        column, size, rows = conn.execute(FACTS).fetchone() or ("?", 0, 0)
        query = (conn.execute(QUERY).fetchone() or ("",))[0]
        user = (conn.execute(HEAVIEST).fetchone() or ("",))[0]
        results = {
            "column": column,
            "rows": rows,
            "table_mb": size / 1e6,
            "all_rows": timed(conn, ALL_ROWS, {"q": query}, args.repeat),
            "heaviest_user": timed(conn, ONE_USER, {"q": query, "user": user}, args.repeat),
        }
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
