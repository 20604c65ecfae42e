"""The local model's OpenMP threads sleep when idle (OMP_WAIT_POLICY=PASSIVE) unless the environment says
otherwise: spinning teams of two processes embedding at once slowed each other ninefold (bench/omp_wait.py).
libgomp reads its settings once, as it loads, and prints them with OMP_DISPLAY_ENV=verbose: what it shows is
what it uses. It shows OMP_WAIT_POLICY as PASSIVE when unset too; its spin count tells the two apart (300,000
spins by default, none when passive, 30 billion when active)."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROBE = """
import django
django.setup()
from memoryplatform.embeddings import get_embedder
print(len(get_embedder().embed_query("where does the user live")))
"""


def _openmp_settings(**environ: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OMP_")}
    env |= {"EMBEDDINGS_PROVIDER": "local", "EMBEDDINGS_MODEL": "", "OMP_DISPLAY_ENV": "verbose", **environ}
    done = subprocess.run(  # noqa: S603
        [sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "384"  # the model was loaded and embedded the query
    shown = {}
    for line in done.stderr.splitlines():
        name, sep, value = line.strip().partition(" = ")
        if sep and name.startswith(("OMP_", "GOMP_")):
            shown[name] = value.strip("'")
    return shown


def test_the_local_models_idle_threads_sleep_and_use_embeddings_threads() -> None:
    shown = _openmp_settings(EMBEDDINGS_THREADS="2")
    assert shown["GOMP_SPINCOUNT"] == "0"
    assert shown["OMP_NUM_THREADS"] == "2"


def test_the_environment_still_decides() -> None:
    shown = _openmp_settings(OMP_WAIT_POLICY="ACTIVE", OMP_NUM_THREADS="1")
    assert (shown["OMP_WAIT_POLICY"], shown["GOMP_SPINCOUNT"]) == ("ACTIVE", "30000000000")
    assert shown["OMP_NUM_THREADS"] == "1"
