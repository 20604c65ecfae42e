"""`manage.py dream`, and the metrics directory `manage.py serve` prepares for its processes."""

import io
import os
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError

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


# --- serve's metrics directory -----------------------------------------------------------------------


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
