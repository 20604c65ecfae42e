"""The Celery task and beat schedule; and, with real Redis and PostgreSQL, a real worker process."""

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import pytest
from django.conf import settings
from django.db import OperationalError

from config.celery import app, dream_expires_seconds
from dream.models import DreamRun
from dream.tasks import dream_run_cycle_task
from memoryplatform.crontabs import crontab_min_period, crontab_next_after
from tests.helpers import REDIS_URL, needs_redis, url_of_the_test_database
from tests.llm_server import Answer, LLMScript, llm_server
from usermemory.models import MemoryEntry

ROOT = Path(__file__).resolve().parents[2]


# --- Task and schedule -------------------------------------------------------------------------------


def test_task_is_registered_with_limits_and_retries():
    app.loader.import_default_modules()
    task = app.tasks["dream.run_cycle"]
    assert task.name == dream_run_cycle_task.name == "dream.run_cycle"
    assert task.time_limit == settings.CELERY_TASK_TIME_LIMIT
    assert task.soft_time_limit == settings.CELERY_TASK_SOFT_TIME_LIMIT
    assert task.soft_time_limit < task.time_limit
    assert OperationalError in task.autoretry_for
    assert task.retry_backoff and task.max_retries == 3
    assert app.conf.task_serializer == "json" and app.conf.accept_content == ["json"]


@pytest.mark.django_db
def test_task_runs_a_cycle_and_returns_json(agent_a, dream_policy, memory):
    dream_policy(agent_a)
    memory(agent_a, "old", updated_days=60)

    summary = dream_run_cycle_task.apply(kwargs={"trigger": "manual"}).get()

    assert json.loads(json.dumps(summary)) == summary
    assert summary["status"] == "succeeded" and summary["entriesPruned"] == 1
    assert DreamRun.objects.get().pk == summary["runId"]


@pytest.mark.django_db
def test_task_retries_on_a_transient_database_error(monkeypatch):
    from dream import services

    def broken(**kwargs):  # type: ignore[no-untyped-def]
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(services, "dream_run_cycle", broken)
    retried = []
    monkeypatch.setattr(dream_run_cycle_task, "retry", lambda *a, **kw: retried.append(kw) or 1 / 0)

    with pytest.raises(ZeroDivisionError):
        dream_run_cycle_task.apply(throw=True).get()
    assert retried and isinstance(retried[0]["exc"], OperationalError)


def test_beat_schedule_runs_dream_on_dream_crontab_with_expiry_under_the_period():
    entry = app.conf.beat_schedule["dream-cycle"]
    assert entry["task"] == "dream.run_cycle"
    assert entry["schedule"] == settings.DREAM_CRONTAB
    assert entry["kwargs"] == {"trigger": "schedule"}
    assert 0 < entry["options"]["expires"] < crontab_min_period(settings.DREAM_CRONTAB)


@pytest.mark.parametrize(
    ("spec", "period"),
    [({"minute": "0", "hour": "3"}, 86400), ({"minute": "*/5"}, 300), ({"minute": "0", "hour": "3,4"}, 3600)],
)
def test_expiry_follows_the_shortest_gap_of_the_schedule(spec, period):
    from celery.schedules import crontab

    schedule = crontab(**spec, app=app)
    assert crontab_min_period(schedule) == period
    assert dream_expires_seconds(schedule) == int(period * 0.9)


def test_next_firing_after_a_moment():
    from datetime import UTC, datetime

    from celery.schedules import crontab

    schedule = crontab(minute="0", hour="3", app=app)
    moment = datetime(2026, 5, 1, 3, 0, 30, tzinfo=UTC)
    assert crontab_next_after(schedule, moment) == datetime(2026, 5, 2, 3, 0, tzinfo=UTC)


@pytest.mark.django_db
def test_web_metrics_show_dream_counters_after_a_cycle_in_this_process(client, agent_a, dream_policy, memory):
    dream_policy(agent_a)
    memory(agent_a, "old", updated_days=60)
    dream_run_cycle_task.apply().get()

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


# --- A real worker -----------------------------------------------------------------------------------


def scraped(body: str, name: str) -> float:
    """The value of an unlabelled sample in a Prometheus text exposition (0 when absent)."""
    match = re.search(rf"^{re.escape(name)} ([0-9.e+]+)$", body, re.M)
    return float(match.group(1)) if match else 0.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Worker:
    def __init__(self, process: subprocess.Popen, port: int, queue: str, log: Path) -> None:
        self.process, self.port, self.queue, self.log = process, port, queue, log

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=5) as response:
            return response.read().decode()

    def send(self, **kwargs: object):  # type: ignore[no-untyped-def]
        return app.send_task("dream.run_cycle", kwargs=kwargs, queue=self.queue)


@pytest.fixture
def worker(tmp_path):  # type: ignore[no-untyped-def]
    """A real `celery worker` (prefork, 2 processes, multiprocess metrics, as in docker-compose.yml) on the
    test database, its own queue, and a metrics port; always stopped at teardown."""
    port, queue = free_port(), f"dream-test-{uuid.uuid4().hex[:8]}"
    metrics_dir = tmp_path / "prometheus"
    metrics_dir.mkdir()
    env = {
        **os.environ,
        "DATABASE_URL": url_of_the_test_database(),
        "REDIS_URL": REDIS_URL,
        "WORKER_METRICS_PORT": str(port),
        "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir),
        "CELERY_TASK_ALWAYS_EAGER": "false",
        "SECRET_KEY": "worker-test",
    }
    log = tmp_path / "worker.log"
    celery = str(Path(sys.executable).parent / "celery")
    argv = [celery, "-A", "config", "worker", "--pool=prefork", "--concurrency=2", "-Q", queue,
            "-n", f"{queue}@%h", "--without-gossip", "--without-mingle", "--loglevel=INFO"]  # fmt: skip
    with log.open("w") as out:
        process = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)  # noqa: S603
    running = Worker(process, port, queue, log)
    try:
        deadline = time.monotonic() + 60
        while True:  # ready when the metrics port answers and the worker says so
            assert process.poll() is None, f"worker exited early:\n{log.read_text()}"
            try:
                running.metrics()
                if "ready." in log.read_text():
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, f"worker not ready in 60 s:\n{log.read_text()}"
            time.sleep(0.2)
        yield running
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


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


@needs_redis
@pytest.mark.django_db(transaction=True)
def test_summaries_in_a_worker_are_scraped_from_it(llm_env, worker, agent_a, dream_policy, memory):
    ids = [memory(agent_a, f"trip.{n}", f"fact {n}", user="u-sum").pk for n in range(12)]
    dream_policy(agent_a, prune_stale_after_days=0, summarize_interactions=True, summarize_min_entries=10)
    answer = {"summaries": [{"key": "trip", "value": "all of it", "sources": ids}]}
    llm_env.answers = [Answer(answer, input_tokens=1000, output_tokens=200)]
    names = (
        "dream_entries_summarized_total",
        "dream_llm_cost_dollars_total",
        "dream_summarization_failed_total",
    )
    before = worker.metrics()

    summary = worker.send(trigger="schedule").get(timeout=90)

    assert summary["status"] == "succeeded" and summary["entriesSummarized"] == 12, summary
    after = worker.metrics()
    delta = {name: round(scraped(after, name) - scraped(before, name), 6) for name in names}
    assert delta == {
        "dream_entries_summarized_total": 12,
        "dream_llm_cost_dollars_total": 0.12,
        "dream_summarization_failed_total": 0,
    }
    assert MemoryEntry.objects.filter(user_id="u-sum", superseded_by__isnull=False).count() == 12


def make_stale(agent, memory, count: int) -> None:  # type: ignore[no-untyped-def]
    for i in range(count):
        memory(agent, f"old-{i}", updated_days=60, user=f"user-{i}")


@needs_redis
@pytest.mark.django_db(transaction=True)
def test_a_cycle_sent_through_the_broker_runs_and_its_counters_are_scraped_from_the_worker(
    worker, agent_a, agent_b, dream_policy, memory
):
    dream_policy(agent_a, prune_stale_after_days=30)
    make_stale(agent_a, memory, 3)
    memory(agent_a, "lang", "English")
    memory(agent_b, "lang", "German", visibility="global")
    before = worker.metrics()

    summary = worker.send(trigger="schedule").get(timeout=90)

    assert summary["status"] == "succeeded", summary
    assert (summary["entriesPruned"], summary["contradictionsFound"]) == (3, 1)
    assert MemoryEntry.objects.filter(key__startswith="old-").count() == 0
    after = worker.metrics()
    delta = {name: scraped(after, name) - scraped(before, name) for name in (
        "dream_entries_pruned_total", "dream_contradictions_found_total", "dream_users_processed_total",
        "dream_duration_seconds_count", "dream_cycles_failed_total")}  # fmt: skip
    assert delta == {
        "dream_entries_pruned_total": 3,
        "dream_contradictions_found_total": 1,
        "dream_users_processed_total": 4,  # user-0..2 and u1
        "dream_duration_seconds_count": 1,
        "dream_cycles_failed_total": 0,
    }


@needs_redis
@pytest.mark.django_db(transaction=True)
def test_two_cycles_sent_at_once_give_one_succeeded_and_one_skipped(worker, agent_a, dream_policy, memory):
    dream_policy(agent_a, prune_stale_after_days=30)
    make_stale(agent_a, memory, 4)
    before = worker.metrics()

    # One row per batch with a pause: the first cycle holds the lock for over a second.
    results = [worker.send(trigger="manual", batch_size=1, batch_pause=0.4) for _ in range(2)]
    summaries = [r.get(timeout=90) for r in results]

    assert sorted(s["status"] for s in summaries) == ["skipped", "succeeded"], summaries
    succeeded = next(s for s in summaries if s["status"] == "succeeded")
    skipped = next(s for s in summaries if s["status"] == "skipped")
    assert succeeded["entriesPruned"] == 4 and skipped["entriesPruned"] == 0
    assert skipped["error"].startswith("Another Dream cycle is running")
    assert MemoryEntry.objects.count() == 0
    assert sorted(DreamRun.objects.values_list("status", flat=True)) == ["skipped", "succeeded"]
    after = worker.metrics()
    assert scraped(after, "dream_entries_pruned_total") - scraped(before, "dream_entries_pruned_total") == 4
    assert (
        scraped(after, "dream_duration_seconds_count") - scraped(before, "dream_duration_seconds_count") == 1
    )


def test_worker_metrics_port_is_off_when_empty(monkeypatch):
    from memoryplatform import celery as celery_module

    started = []
    monkeypatch.setattr("prometheus_client.start_http_server", lambda *a, **kw: started.append(a))
    monkeypatch.setenv("WORKER_METRICS_PORT", "")
    celery_module._serve_worker_metrics(sender=None)
    assert started == []

    monkeypatch.setenv("WORKER_METRICS_PORT", "9123")
    celery_module._serve_worker_metrics(sender=None)
    assert started == [(9123,)]


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
    """`manage.py dream_scheduler --run-now` (what `serve` starts without Redis) runs a cycle with summaries;
    its counters land in PROMETHEUS_MULTIPROC_DIR, which the web's /metrics aggregates (read here the same
    way, with prometheus_client's MultiProcessCollector)."""
    from prometheus_client import CollectorRegistry
    from prometheus_client.multiprocess import MultiProcessCollector

    ids = [memory(agent_a, f"trip.{n}", f"fact {n}", user="u-sched").pk for n in range(12)]
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
    env.pop("REDIS_URL", None)
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
