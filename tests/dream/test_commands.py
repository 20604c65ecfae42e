"""`manage.py dream`, the embedded scheduler, and `manage.py serve` starting it."""

import io
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError
from dream.scheduler import dream_schedule_loop

from dream.models import DreamRun
from memoryplatform.management.commands import serve
from usermemory.models import MemoryEntry, MemoryEvent

ROOT = Path(__file__).resolve().parents[2]


def run_dream(*args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("dream", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


@pytest.mark.django_db
def test_dream_command_runs_a_cycle_with_progress_and_summary(agent_a, agent_b, dream_policy, memory):
    dream_policy(agent_a, prune_stale_after_days=30)
    memory(agent_a, "old", updated_days=60)
    memory(agent_a, "lang", "English")
    memory(agent_b, "lang", "German", visibility="global")

    out, err = run_dream()

    run = DreamRun.objects.get()
    assert run.status == DreamRun.Status.SUCCEEDED and run.trigger == DreamRun.Trigger.MANUAL
    assert f"Dream run #{run.pk} succeeded" in out
    assert "entries pruned:  1" in out
    assert "contradictions found: 1 (1 entries flagged, 0 cleared)" in out
    assert "agent-a: pruned 1" in out
    assert "2/2" in err  # the progress bar reached its end
    assert MemoryEntry.objects.count() == 2


@pytest.mark.django_db
def test_dream_command_dry_run_changes_nothing(agent_a, agent_b, dream_policy, memory):
    dream_policy(agent_a, prune_stale_after_days=30)
    memory(agent_a, "old", updated_days=60)
    memory(agent_a, "lang", "English")
    memory(agent_b, "lang", "German", visibility="global")
    before = list(MemoryEntry.objects.order_by("id").values_list("id", "conflicted", "value_text"))

    out, _ = run_dream("--dry-run", "--no-progress")

    assert "(dry run: nothing was changed)" in out
    assert "entries would be pruned:  1" in out
    assert "1 entries would be flagged" in out
    assert list(MemoryEntry.objects.order_by("id").values_list("id", "conflicted", "value_text")) == before
    assert MemoryEvent.objects.count() == 0
    assert DreamRun.objects.get().dry_run is True


@pytest.mark.django_db
def test_dream_command_for_one_agent(agent_a, agent_b, dream_policy, memory):
    dream_policy(agent_a)
    dream_policy(agent_b)
    memory(agent_a, "old", updated_days=60)
    kept = memory(agent_b, "old", updated_days=60)

    out, _ = run_dream("--agent", "agent-b", "--no-progress")

    assert "agents processed:     1" in out
    assert list(MemoryEntry.objects.values_list("source_agent_id", flat=True)) == ["agent-a"]
    assert not MemoryEntry.objects.filter(id=kept.id).exists()


@pytest.mark.django_db
def test_dream_command_refuses_unknown_agent_and_bad_batch_size(agent_a):
    with pytest.raises(CommandError, match="No agent 'nobody'"):
        run_dream("--agent", "nobody")
    with pytest.raises(CommandError, match="--batch-size"):
        run_dream("--batch-size", "0")
    assert not DreamRun.objects.exists()


@pytest.mark.django_db
def test_dream_command_reports_no_enabled_agent(agent_a, dream_policy):
    dream_policy(agent_a, dream_enabled=False)

    out, _ = run_dream("--agent", "agent-a", "--no-progress")

    assert "No agent has Dream enabled ('agent-a')." in out


@pytest.mark.django_db
def test_dream_command_fails_loudly(agent_a, dream_policy, memory, monkeypatch):
    from usermemory.sql import write

    dream_policy(agent_a)
    memory(agent_a, "old", updated_days=60)
    monkeypatch.setattr(write, "delete_entries", lambda **kw: 1 / 0)

    with pytest.raises(CommandError, match="Dream cycle failed: ZeroDivisionError"):
        run_dream("--no-progress")
    assert DreamRun.objects.get().status == DreamRun.Status.FAILED


# --- The embedded scheduler --------------------------------------------------------------------------


class FakeClock:
    """The loop's clock and its wait: ``asked_at`` are the moments a run is asked for (the admin's button)."""

    def __init__(self, start: datetime, asked_at: tuple[datetime, ...] = ()) -> None:
        self.now = start
        self.slept = 0.0
        self.asked_at = list(asked_at)

    def wait(self, seconds: float) -> bool:
        assert 0 < seconds <= 1.0
        self.now += timedelta(seconds=seconds)
        self.slept += seconds
        if self.asked_at and self.now >= self.asked_at[0]:
            self.asked_at.pop(0)
            return True
        return False


def every_five_minutes(moment: datetime) -> datetime:
    base = moment.replace(second=0, microsecond=0)
    return base + timedelta(minutes=5 - base.minute % 5)


def test_scheduler_loop_runs_the_cycle_at_each_firing_and_survives_a_failure():
    clock = FakeClock(datetime(2026, 1, 1, 2, 58, 30, tzinfo=UTC))
    ran_at: list[datetime] = []

    def cycle(asked: bool) -> None:
        ran_at.append(clock.now)
        if len(ran_at) == 1:
            raise RuntimeError("first cycle fails")

    started = dream_schedule_loop(
        next_after=every_five_minutes,
        now=lambda: clock.now,
        wait=clock.wait,
        should_stop=lambda: len(ran_at) >= 3,
        run_cycle=cycle,
    )

    assert started == 3
    assert [t.strftime("%H:%M:%S") for t in ran_at] == ["03:00:00", "03:05:00", "03:10:00"]


def test_scheduler_loop_can_run_at_start_and_stops_when_asked():
    clock = FakeClock(datetime(2026, 1, 1, 2, 58, 30, tzinfo=UTC))
    ran: list[datetime] = []

    started = dream_schedule_loop(
        next_after=every_five_minutes,
        now=lambda: clock.now,
        wait=clock.wait,
        should_stop=lambda: clock.now >= datetime(2026, 1, 1, 2, 59, tzinfo=UTC),
        run_cycle=lambda asked: ran.append(clock.now),
        run_first=True,
    )

    assert started == 1 and ran == [datetime(2026, 1, 1, 2, 58, 30, tzinfo=UTC)]


def test_scheduler_loop_runs_an_asked_cycle_at_once_and_keeps_the_schedule():
    clock = FakeClock(
        datetime(2026, 1, 1, 2, 58, 30, tzinfo=UTC), asked_at=(datetime(2026, 1, 1, 2, 59, tzinfo=UTC),)
    )
    ran: list[tuple[str, bool]] = []

    dream_schedule_loop(
        next_after=every_five_minutes,
        now=lambda: clock.now,
        wait=clock.wait,
        should_stop=lambda: len(ran) >= 2,
        run_cycle=lambda asked: ran.append((clock.now.strftime("%H:%M:%S"), asked)),
    )

    assert ran == [("02:59:00", True), ("03:00:00", False)]


def test_scheduler_process_stops_when_its_parent_is_gone(tmp_path):
    # The suite's own embedded server (its DATA_DIR): the scheduler connects to listen for the admin's button.
    env = {**os.environ, "SECRET_KEY": "test", "DATA_DIR": str(settings.DATA_DIR)}
    env.pop("DATABASE_URL", None)
    result = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "dream_scheduler", "--parent-pid", "1"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "Dream scheduler: cycles on" in result.stdout


# --- serve -------------------------------------------------------------------------------------------


@pytest.fixture
def fake_exec(monkeypatch, tmp_path, db):  # type: ignore[no-untyped-def]  # serve checks the database
    calls: dict[str, list] = {"execv": [], "popen": []}
    monkeypatch.setattr(serve.os, "execv", lambda path, argv: calls["execv"].append(argv))
    monkeypatch.setattr(serve.subprocess, "Popen", lambda argv, **kw: calls["popen"].append(argv))
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path / "metrics"))
    monkeypatch.setenv("SERVE_THREADS", "unset")  # serve sets it for the server: teardown restores it
    monkeypatch.setattr(serve, "check_port_free", lambda host, port: None)  # nothing is served here
    return calls


def test_serve_starts_one_scheduler_beside_the_server(fake_exec, settings, tmp_path):
    call_command("serve", "--workers", "2", stdout=io.StringIO())

    assert len(fake_exec["popen"]) == 1
    assert fake_exec["popen"][0][-4:] == ["dream_scheduler", "--parent-pid", str(os.getpid()), "--supervise"]
    argv = fake_exec["execv"][0]
    assert argv[1:4] == ["-m", "uvicorn", "config.asgi:application"]
    assert argv[argv.index("--workers") + 1] == "2"
    assert os.environ["SERVE_THREADS"] == "4"  # each worker's threads for Django's views
    assert (tmp_path / "metrics").is_dir()  # multiprocess metrics: the web's /metrics sees the scheduler


def test_serve_threads_can_be_set(fake_exec, settings):
    call_command("serve", "--threads", "1", stdout=io.StringIO())
    assert os.environ["SERVE_THREADS"] == "1"


def test_serve_can_run_without_the_scheduler(fake_exec, settings):
    call_command("serve", "--no-dream-scheduler", stdout=io.StringIO())
    assert fake_exec["popen"] == [] and len(fake_exec["execv"]) == 1


def test_serve_uses_data_dir_prometheus_when_no_multiprocess_dir_is_set(monkeypatch, tmp_path):
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", "placeholder")  # so teardown restores the variable
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR")
    monkeypatch.setattr(settings, "DATA_DIR", tmp_path / "var")
    (tmp_path / "var" / "prometheus").mkdir(parents=True)
    (tmp_path / "var" / "prometheus" / "counter_123.db").write_bytes(b"stale")

    directory = serve.prepare_metrics_dir()

    assert directory == str(tmp_path / "var" / "prometheus")
    assert os.environ["PROMETHEUS_MULTIPROC_DIR"] == directory
    assert list(Path(directory).iterdir()) == []  # emptied at start
