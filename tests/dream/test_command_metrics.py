"""A Dream cycle run by hand (``manage.py dream``) reaches the server's /metrics, as a scheduled one does."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from prometheus_client import CollectorRegistry
from prometheus_client.multiprocess import MultiProcessCollector

from tests.helpers import url_of_the_test_database


@pytest.mark.django_db(transaction=True)
def test_a_dream_run_from_the_command_counts_into_the_servers_metrics(tmp_path):
    metrics_dir = tmp_path / "prometheus"
    metrics_dir.mkdir()  # as `manage.py serve` makes it, in DATA_DIR
    env = {name: value for name, value in os.environ.items() if name != "PROMETHEUS_MULTIPROC_DIR"}
    env.update(
        DATABASE_URL=url_of_the_test_database(), DATA_DIR=str(tmp_path), SECRET_KEY=settings.SECRET_KEY
    )
    manage = Path(settings.BASE_DIR) / "manage.py"
    done = subprocess.run(
        [sys.executable, str(manage), "dream", "--no-progress"], env=env, capture_output=True, timeout=300
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]

    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=str(metrics_dir))  # what the server's /metrics reads
    assert registry.get_sample_value("dream_duration_seconds_count") == 1
