"""The scheduler process (`manage.py dream_scheduler`, the one way background work runs): its cron, a cycle's
counters seen by the web's /metrics, and the admin's "Run Dream now" run by a real scheduler process."""

import json
import os
import re
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.urls import reverse

from dream.models import DreamRun
from dream.scheduler import cron_next_after
from dream.services import dream_run_cycle
from tests.helpers import scheduler_process, url_of_the_test_database
from tests.llm_server import Answer, LLMScript, llm_server

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("spec", "moment", "following"),
    [
        ("0 3 * * *", datetime(2026, 5, 1, 3, 0, 30, tzinfo=UTC), datetime(2026, 5, 2, 3, 0, tzinfo=UTC)),
        ("*/5 * * * *", datetime(2026, 5, 1, 3, 2, tzinfo=UTC), datetime(2026, 5, 1, 3, 5, tzinfo=UTC)),
        ("0 3 * * 1", datetime(2026, 5, 1, 12, 0, tzinfo=UTC), datetime(2026, 5, 4, 3, 0, tzinfo=UTC)),
    ],
)
def test_next_firing_after_a_moment(spec, moment, following):
    assert cron_next_after(spec, moment) == following


@pytest.mark.django_db
def test_web_metrics_show_dream_counters_after_a_cycle_in_this_process(client, agent_a, dream_policy, memory):
    dream_policy(agent_a)
    memory(agent_a, "old", updated_days=60)
    dream_run_cycle(trigger=DreamRun.Trigger.MANUAL)

    body = client.get("/metrics").content.decode()  # the test client comes from 127.0.0.1

    for name in (
        "dream_users_processed_total",
        "dream_entries_pruned_total",
        "dream_contradictions_found_total",
        "dream_cycles_failed_total",
        "dream_duration_seconds_count",
        "dream_entries_summarized_total",
        "dream_summarization_failed_total",
        "dream_llm_cost_dollars_total",
    ):
        assert re.search(rf"^{name} [0-9.e+]+$", body, re.M), name
    assert scraped(body, "dream_entries_pruned_total") >= 1


def scraped(body: str, name: str) -> float:
    """The value of an unlabelled sample in a Prometheus text exposition (0 when absent)."""
    match = re.search(rf"^{re.escape(name)} ([0-9.e+]+)$", body, re.M)
    return float(match.group(1)) if match else 0.0


@pytest.fixture
def llm_env(monkeypatch):  # type: ignore[no-untyped-def]
    """A scripted chat-completions server, and the LLM_* environment a worker started after it reads."""
    script = LLMScript([])
    with llm_server(script):
        for name, value in {
            "LLM_PROVIDER": "openai",
            "LLM_URL": script.url,
            "LLM_MODEL": "test-model",
            "LLM_PRICES": json.dumps({"test-model": [100.0, 100.0]}),
        }.items():
            monkeypatch.setenv(name, value)
        yield script


def test_an_empty_multiprocess_dir_counts_as_unset():
    """A .env copied from .env.example sets PROMETHEUS_MULTIPROC_DIR to "": settings treat that as unset, so
    django-prometheus's /metrics (which tests for the name only) keeps working."""
    import subprocess
    import sys

    code = "import os, django; django.setup(); print('PROMETHEUS_MULTIPROC_DIR' in os.environ)"
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": "", "DJANGO_SETTINGS_MODULE": "config.settings"}
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.strip() == "False"


@pytest.mark.django_db(transaction=True)
def test_summaries_in_the_embedded_scheduler_are_in_the_webs_multiprocess_metrics(
    llm_env, agent_a, dream_policy, memory, tmp_path
):
    """`manage.py dream_scheduler --run-now` (what `serve` starts) runs a cycle with summaries;
    its counters land in PROMETHEUS_MULTIPROC_DIR, which the web's /metrics aggregates (read here the same
    way, with prometheus_client's MultiProcessCollector)."""
    from prometheus_client import CollectorRegistry
    from prometheus_client.multiprocess import MultiProcessCollector

    # related notes under numbered keys: what a summary may take (issue 56); their vectors first
    ids = [
        memory(agent_a, f"trip/{n}", f"the Lisbon trip in May, note {n}", user="u-sched").pk
        for n in range(12)
    ]
    call_command("embed", "--drain")
    dream_policy(agent_a, prune_stale_after_days=0, summarize_interactions=True, summarize_min_entries=10)
    answer = {"summaries": [{"key": "trip", "value": "all of it", "sources": ids}]}
    llm_env.answers = [Answer(answer, input_tokens=1000, output_tokens=200)]
    metrics_dir = tmp_path / "prometheus"
    metrics_dir.mkdir()
    env = {
        **os.environ,
        "DATABASE_URL": url_of_the_test_database(),
        "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir),
        "SECRET_KEY": "scheduler-test",
    }
    argv = [sys.executable, "manage.py", "dream_scheduler", "--run-now", "--parent-pid", str(os.getpid())]
    log = tmp_path / "scheduler.log"
    with log.open("w") as out:
        scheduler = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)  # noqa: S603
    try:
        deadline = time.monotonic() + 90
        while not DreamRun.objects.filter(status=DreamRun.Status.SUCCEEDED).exists():
            assert scheduler.poll() is None, log.read_text()
            assert time.monotonic() < deadline, f"no cycle in 90 s:\n{log.read_text()}"
            time.sleep(0.2)
    finally:
        scheduler.terminate()
        scheduler.wait(timeout=30)
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=str(metrics_dir))
    assert registry.get_sample_value("dream_entries_summarized_total") == 12
    assert registry.get_sample_value("dream_llm_cost_dollars_total") == pytest.approx(0.12)
    assert registry.get_sample_value("dream_summarization_failed_total") == 0


@pytest.mark.django_db(transaction=True)
def test_run_dream_now_in_the_admin_is_run_by_the_scheduler_process(
    client, agent_a, dream_policy, memory, tmp_path
):
    """The button notifies the scheduler as its request commits; the scheduler, waiting between firings
    (daily at 03:00 here), runs the cycle at once, recorded as the admin's."""
    dream_policy(agent_a)
    memory(agent_a, "old", updated_days=60)
    client.force_login(User.objects.create_superuser("boss", "boss@example.com", "pw-for-tests-only"))
    quiet = {"DREAM_SCHEDULE": "0 3 * * *", "EMBEDDINGS_REEMBED_INTERVAL": "0", "EXTRACTION_INTERVAL": "0"}
    log = tmp_path / "scheduler.log"
    with scheduler_process(log, **quiet) as scheduler:
        response = client.post(reverse("admin:dream_dreamrun_run_now"), follow=True)
        assert "A Dream cycle was asked for" in response.content.decode()

        deadline = time.monotonic() + 90
        while not DreamRun.objects.filter(status=DreamRun.Status.SUCCEEDED).exists():
            assert scheduler.poll() is None, log.read_text()
            assert time.monotonic() < deadline, f"no cycle in 90 s:\n{log.read_text()}"
            time.sleep(0.1)
    run = DreamRun.objects.get()
    assert (run.trigger, run.entries_pruned) == (DreamRun.Trigger.ADMIN, 1)
