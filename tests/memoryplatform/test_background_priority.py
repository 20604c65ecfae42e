"""Background processes yield the cores to requests (issues 34, 48): at nice BACKGROUND_NICE, with
BACKGROUND_EMBEDDINGS_THREADS for the local model. Each case runs in a process of its own, as a Celery
worker does at start (config/celery.py, worker_init)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# What a background process is once it has yielded (twice: the second call changes nothing).
PROBE = """
import os, django
django.setup()
from memoryplatform.embeddings.consumer import yield_to_requests
yield_to_requests()
yield_to_requests()
print(os.nice(0), os.environ.get("OMP_NUM_THREADS"))
"""

pytestmark = pytest.mark.skipif(not hasattr(os, "nice"), reason="os.nice is Unix's")


def _background(**settings: str) -> tuple[int, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BACKGROUND_", "OMP_"))}
    argv = [sys.executable, "-c", PROBE]
    done = subprocess.run(argv, cwd=ROOT, env=env | settings, capture_output=True, text=True, check=True)  # noqa: S603
    nice, threads = done.stdout.split()
    return int(nice), threads


def test_a_background_process_runs_at_nice_10_with_one_model_thread() -> None:
    assert _background() == (max(_base(), 10), "1")


def test_each_setting_changes_its_part() -> None:
    assert _background(BACKGROUND_NICE="0") == (_base(), "1")
    assert _background(BACKGROUND_NICE="5", BACKGROUND_EMBEDDINGS_THREADS="2") == (max(_base(), 5), "2")


def _base() -> int:
    """The nice a child starts at: this process's, which a command run by an earlier test (`manage.py embed`,
    `manage.py dream`) may have lowered; a background process goes down to BACKGROUND_NICE, never back up."""
    return os.nice(0)
