"""Dream's task on real Celery workers, on each broker (the embedded default's PostgreSQL, and Redis): a
cycle's counters in the web's multiprocess metrics, the admin's "Run Dream now" run by a worker, and a cycle
that never runs twice: two deliveries at once, and a worker killed in the middle of one (late
acknowledgement: the broker gives the message to a worker again; the advisory lock and the abandoned run's
record keep it one cycle)."""

import json
import os
import re
import signal
import time

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.urls import reverse

from dream.models import DreamRun
from dream.services import dream_run_cycle
from tests.helpers import celery_worker, publishing_to
from tests.llm_server import Answer, LLMScript, llm_server


def wait_until(what: str, condition, worker, seconds: float = 120) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while not condition():
        assert worker.process.poll() is None, f"the worker ended while waiting for {what}"
        assert time.monotonic() < deadline, f"no {what} in {seconds:.0f} s:\n{worker.log.read_text()[-3000:]}"
        time.sleep(0.1)


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


def summaries_to_write(agent_a, dream_policy, memory, llm_env, *, delay: float = 0.0) -> None:
    # related notes under numbered keys: what a summary may take (issue 56); their vectors first
    ids = [
        memory(agent_a, f"trip/{n}", f"the Lisbon trip in May, note {n}", user="u-tasks").pk
        for n in range(12)
    ]
    call_command("embed", "--drain")
    dream_policy(agent_a, prune_stale_after_days=0, summarize_interactions=True, summarize_min_entries=10)
    answer = {"summaries": [{"key": "trip", "value": "all of it", "sources": ids}]}
    llm_env.answers = [Answer(answer, input_tokens=1000, output_tokens=200, delay=delay)]


@pytest.mark.django_db(transaction=True)
def test_a_cycle_on_a_worker_counts_into_the_webs_multiprocess_metrics(
    broker, llm_env, agent_a, dream_policy, memory, tmp_path
):
    """A cycle with summaries on a worker: its counters, and the task's own (runs, duration), land in
    PROMETHEUS_MULTIPROC_DIR, which the web's /metrics aggregates (read here the same way)."""
    from prometheus_client import CollectorRegistry
    from prometheus_client.multiprocess import MultiProcessCollector

    summaries_to_write(agent_a, dream_policy, memory, llm_env)
    metrics_dir = tmp_path / "prometheus"
    metrics_dir.mkdir()
    with (
        celery_worker(tmp_path / "worker.log", broker, PROMETHEUS_MULTIPROC_DIR=str(metrics_dir)) as worker,
        publishing_to(broker),
    ):
        from dream.tasks import dream_run_cycle_task

        dream_run_cycle_task.apply_async(kwargs={"trigger": "schedule"})
        wait_until("a cycle", DreamRun.objects.filter(status=DreamRun.Status.SUCCEEDED).exists, worker)
        worker.wait_for("Task dream.run_cycle[")
        worker.wait_for("succeeded in")
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=str(metrics_dir))
    assert registry.get_sample_value("dream_entries_summarized_total") == 12
    assert registry.get_sample_value("dream_llm_cost_dollars_total") == pytest.approx(0.12)
    labels = {"task": "dream.run_cycle", "state": "SUCCESS"}
    assert registry.get_sample_value("celery_task_runs_total", labels) == 1
    assert registry.get_sample_value("celery_task_duration_seconds_count", {"task": "dream.run_cycle"}) == 1
    assert DreamRun.objects.get().trigger == DreamRun.Trigger.SCHEDULE


@pytest.mark.django_db(transaction=True)
def test_run_dream_now_in_the_admin_is_run_by_a_worker(
    broker, client, agent_a, dream_policy, memory, tmp_path
):
    """The button enqueues the cycle; a worker runs it at once, recorded as the admin's."""
    dream_policy(agent_a)
    memory(agent_a, "old", updated_days=60)
    client.force_login(User.objects.create_superuser("boss", "boss@example.com", "pw-for-tests-only"))
    with celery_worker(tmp_path / "worker.log", broker) as worker, publishing_to(broker):
        response = client.post(reverse("admin:dream_dreamrun_run_now"), follow=True)
        assert "A Dream cycle was queued" in response.content.decode()
        wait_until("a cycle", DreamRun.objects.filter(status=DreamRun.Status.SUCCEEDED).exists, worker)
    run = DreamRun.objects.get()
    assert (run.trigger, run.entries_pruned) == (DreamRun.Trigger.ADMIN, 1)


@pytest.mark.django_db(transaction=True)
def test_two_deliveries_at_once_run_one_cycle(broker, llm_env, agent_a, dream_policy, memory, tmp_path):
    """Two cycles sent together reach the worker's two processes at once: the advisory lock lets one run, the
    other is recorded ``skipped``; the summaries are written once."""
    summaries_to_write(agent_a, dream_policy, memory, llm_env, delay=3.0)
    with celery_worker(tmp_path / "worker.log", broker) as worker, publishing_to(broker):
        from dream.tasks import dream_run_cycle_task

        for _ in range(2):
            dream_run_cycle_task.apply_async(kwargs={"trigger": "schedule"})
        wait_until("both deliveries", lambda: DreamRun.objects.exclude(status="running").count() == 2, worker)
    statuses = sorted(DreamRun.objects.values_list("status", flat=True))
    assert statuses == [DreamRun.Status.SKIPPED, DreamRun.Status.SUCCEEDED]
    assert DreamRun.objects.get(status=DreamRun.Status.SUCCEEDED).entries_summarized == 12
    assert len(llm_env.requests) == 1


@pytest.mark.django_db(transaction=True)
def test_a_worker_process_killed_mid_cycle_loses_no_cycle_and_runs_none_twice(
    broker, llm_env, agent_a, dream_policy, memory, tmp_path
):
    """SIGKILL of the pool process while its cycle waits on the LLM: the message was not acknowledged, so the
    worker gives it back to the broker and a new process runs the cycle again. The killed run is recorded
    failed (abandoned); one cycle succeeds, and the summaries are written once."""
    summaries_to_write(agent_a, dream_policy, memory, llm_env, delay=20.0)
    llm_env.answers.append(Answer(llm_env.answers[0].content, input_tokens=1000, output_tokens=200))
    with (
        celery_worker(tmp_path / "worker.log", broker, CELERY_WORKER_CONCURRENCY="1") as worker,
        publishing_to(broker),
    ):
        from dream.tasks import dream_run_cycle_task

        dream_run_cycle_task.apply_async(kwargs={"trigger": "schedule"})
        wait_until("the LLM call", lambda: len(llm_env.requests) == 1, worker)
        (pool_process,) = worker.pool()
        os.kill(pool_process, signal.SIGKILL)  # as the kernel's OOM killer would
        wait_until(
            "the cycle again", DreamRun.objects.filter(status=DreamRun.Status.SUCCEEDED).exists, worker
        )
    statuses = sorted(DreamRun.objects.values_list("status", flat=True))
    assert statuses == [DreamRun.Status.FAILED, DreamRun.Status.SUCCEEDED]  # the killed run: abandoned
    assert DreamRun.objects.get(status=DreamRun.Status.SUCCEEDED).entries_summarized == 12
    assert len(llm_env.requests) == 2


@pytest.mark.django_db(transaction=True)
def test_a_failing_task_is_counted_by_task():
    """A task that raises (here the database refuses the run's record) counts as a run in state FAILURE and as
    a failure of its task, from Celery's own signals (config/celery.py)."""
    from prometheus_client import REGISTRY

    from dream.tasks import dream_run_cycle_task

    def sample(name: str, **labels: str) -> float:
        return REGISTRY.get_sample_value(name, {"task": "dream.run_cycle", **labels}) or 0.0

    failures, runs = sample("celery_task_failures_total"), sample("celery_task_runs_total", state="FAILURE")

    result = dream_run_cycle_task.apply(kwargs={"trigger": "longer than the column allows"})

    assert result.failed()
    assert sample("celery_task_failures_total") == failures + 1
    assert sample("celery_task_runs_total", state="FAILURE") == runs + 1
    assert sample("celery_task_duration_seconds_count") >= 1
    assert not DreamRun.objects.exists()
