"""The smoke run: a few hundred memories, every operation a few times, two Dream cycles over two agents
(``bench.dream_cycle``), and memory formation on a tiny sample against a scripted LLM (``bench.extraction
--smoke``); exit 0 when every call succeeded.

It uses its own database, ``bench_smoke``, dropped after: in the embedded server of DATA_DIR when
DATABASE_URL is unset, else on the server DATABASE_URL names.
"""

import os
import subprocess
import sys
import time

from bench import target
from bench.measure import log


def _peers_installed() -> bool:
    try:
        import agents  # noqa: F401
        import langgraph.store.postgres  # noqa: F401
    except ImportError:
        return False
    return True


def smoke() -> int:
    started = time.time()
    db = target.resolve(os.environ.get("DATABASE_URL", ""), name="bench_smoke")
    where = f"the embedded server of {target.data_dir()}" if db.embedded else "DATABASE_URL's server"
    log(f"smoke on database {db.name} in {where}")
    peers = _peers_installed()
    env = os.environ | {"DATABASE_URL": db.url}  # the children use the server this process keeps up
    load = [sys.executable, "-m", "bench.load", "--reset", "--memories", "400", "--users", "100",
            "--agents", "6"] + (["--peers"] if peers else [])  # fmt: skip
    run = [sys.executable, "-m", "bench.run", "--n", "3", "--concurrency", "2", "--seconds", "0.3",
           "--tail", "10", "--tail-seconds", "5", "--erase-n", "1", "--warmup", "1"]  # fmt: skip
    run += [] if peers else ["--no-peers"]
    extraction = [sys.executable, "-m", "bench.extraction", "--smoke"]  # the scripted LLM; its own database
    # two Dream cycles with contradictions by meaning (the second reads the key vectors the first kept)
    dream = [sys.executable, "-m", "bench.dream_cycle", "--agents", "2", "--first", "1", "--contradictions",
             "--cycles", "2"]  # fmt: skip
    status = 0
    try:
        for cmd in (load, run, dream, extraction):
            log(f"smoke: {' '.join(cmd[1:])}")
            done = subprocess.run(cmd, cwd=target.ROOT, env=env, check=False)  # noqa: S603
            if done.returncode:
                log(f"smoke FAILED: exit {done.returncode}")
                status = 1
                break
    finally:
        target.drop(db)
    log(f"smoke {'passed' if status == 0 else 'FAILED'} in {time.time() - started:.1f}s")
    return status
