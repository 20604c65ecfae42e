"""Dream's steps are the list of passes in :mod:`dream.passes`: every Dream setting belongs to the cycle or to
one pass (the admin lays it out there), each pass's metrics exist, and a pass added to the list runs in the
cycle, for the policies it asks for, and reports in the command's summary, with no other change (issue 48)."""

import io
from dataclasses import replace

import pytest
from django.core.management import call_command
from prometheus_client import REGISTRY

from dream import passes
from dream.models import DreamPolicy, DreamRun
from dream.passes import CYCLE_FIELDS, PASSES, Pass


def test_every_dream_setting_is_the_cycles_or_one_passes():
    declared = [*CYCLE_FIELDS, *(name for step in PASSES for name in step.policy_fields)]
    assert len(declared) == len(set(declared)), declared
    fields = {f.name for f in DreamPolicy._meta.get_fields()} - {"agent", "updated_at"}
    assert set(declared) == fields


def test_each_pass_names_metrics_that_exist():
    for step in PASSES:
        for name in step.metrics:
            assert REGISTRY.get_sample_value(f"{name}_total") is not None, (step.name, name)


def _tally(cycle, policies):
    cycle.totals.details["tally"] = {"agents": [p.agent_id for p in policies], "dryRun": cycle.dry_run}


TALLY = Pass(
    name="tally",
    title="Dream: tally",
    policy_fields=(),
    run=_tally,
    takes_part=lambda policy: policy.detect_contradictions,
    report=lambda run, summary, would: [
        f"  agents {would}tallied: {', '.join(run.details.get('tally', {}).get('agents', []))}"
    ],
)


@pytest.mark.django_db
@pytest.mark.parametrize("dry_run", [False, True])
def test_a_pass_added_to_the_list_runs_for_its_policies_and_reports(
    agent_a, agent_b, dream_policy, monkeypatch, dry_run
):
    dream_policy(agent_a, detect_contradictions=True)
    dream_policy(agent_b, detect_contradictions=False)
    monkeypatch.setattr(passes, "PASSES", (*PASSES, TALLY))
    out = io.StringIO()

    call_command("dream", "--no-progress", *(["--dry-run"] if dry_run else []), stdout=out)

    run = DreamRun.objects.get()
    assert run.details["tally"] == {"agents": ["agent-a"], "dryRun": dry_run}
    assert (
        "  agents would be tallied: agent-a" if dry_run else "  agents tallied: agent-a"
    ) in out.getvalue()


@pytest.mark.django_db
def test_a_pass_without_a_dry_run_is_left_out_of_one(agent_a, dream_policy, monkeypatch):
    dream_policy(agent_a)
    monkeypatch.setattr(passes, "PASSES", (replace(TALLY, in_dry_run=False),))
    call_command("dream", "--no-progress", "--dry-run", stdout=io.StringIO())
    assert "tally" not in DreamRun.objects.get().details
