"""Dream's services: set-based batches, dry runs, and the advisory locks that keep one cycle at a time."""

import time

import pytest
from django.db import connection
from prometheus_client import REGISTRY

from dream import services
from dream.models import DreamRun
from dream.services import Batching, dream_detect_contradictions, dream_prune_stale, dream_run_cycle
from memoryplatform.locks import LockId
from tests.helpers import HANG_GUARD_SECONDS
from usermemory.models import MemoryEntry, MemoryEntryGroup, MemoryEvent
from usermemory.sql import write as store

pytestmark = pytest.mark.django_db


def ids(qs) -> set[int]:  # type: ignore[no-untyped-def]
    return set(qs.values_list("id", flat=True))


def events(action: str) -> list[MemoryEvent]:
    return list(MemoryEvent.objects.filter(action=action).order_by("entry_id"))


def metric(name: str) -> float:
    return REGISTRY.get_sample_value(name) or 0.0


# --- Stale pruning -----------------------------------------------------------------------------------


@pytest.fixture
def aged(agent_a, agent_b, memory):  # type: ignore[no-untyped-def]
    """Entries of agent A (and one each of agent B and of no agent) around a 30-day staleness line."""
    return {
        "updated_long_ago_but_read_yesterday": memory(agent_a, "k1", updated_days=100, accessed_days=1),
        "updated_lately_but_read_long_ago": memory(agent_a, "k2", updated_days=5, accessed_days=40),
        "never_read_updated_long_ago": memory(
            agent_a, "k3", {"a": 1}, updated_days=40, visibility="group", groups=["team"]
        ),
        "never_read_updated_lately": memory(agent_a, "k4", updated_days=5),
        "agent_b_stale": memory(agent_b, "k5", updated_days=400),
        "ownerless_global_stale": memory(None, "k6", updated_days=400, visibility="global"),
    }


def test_prune_honours_last_access_and_falls_back_to_update_time(aged, agent_a, dream_policy):
    policy = dream_policy(agent_a, prune_stale_after_days=30)

    result = dream_prune_stale(policy=policy)

    gone = {aged["updated_lately_but_read_long_ago"].id, aged["never_read_updated_long_ago"].id}
    assert result.pruned == 2
    assert ids(MemoryEntry.objects.all()) == {e.id for e in aged.values()} - gone
    pruned = events(MemoryEvent.Action.PRUNED)
    assert {e.entry_id for e in pruned} == gone
    assert {e.actor_type for e in pruned} == {MemoryEvent.ActorType.DREAM}
    by_entry = {e.entry_id: e for e in pruned}
    assert by_entry[aged["never_read_updated_long_ago"].id].old_value == {"a": 1}
    assert by_entry[aged["never_read_updated_long_ago"].id].key == "k3"
    assert not MemoryEntryGroup.objects.filter(entry_id__in=gone).exists()


def test_prune_leaves_other_agents_alone_without_cross_agent_maintenance(aged, agent_a, dream_policy):
    dream_prune_stale(policy=dream_policy(agent_a, prune_stale_after_days=30))

    assert MemoryEntry.objects.filter(id=aged["agent_b_stale"].id).exists()
    assert MemoryEntry.objects.filter(id=aged["ownerless_global_stale"].id).exists()


def test_prune_with_cross_agent_maintenance_reaches_every_entry(aged, agent_a, dream_policy):
    policy = dream_policy(agent_a, prune_stale_after_days=30, cross_agent_maintenance=True)

    result = dream_prune_stale(policy=policy, batching=Batching(size=1))

    assert result.pruned == 4
    assert ids(MemoryEntry.objects.all()) == {
        aged["updated_long_ago_but_read_yesterday"].id,
        aged["never_read_updated_lately"].id,
    }
    assert len(events(MemoryEvent.Action.PRUNED)) == 4


def test_zero_days_disables_pruning(aged, agent_a, dream_policy):
    policy = dream_policy(agent_a, prune_stale_after_days=0, cross_agent_maintenance=True)

    assert dream_prune_stale(policy=policy).pruned == 0
    run = dream_run_cycle()

    assert run.status == DreamRun.Status.SUCCEEDED and run.entries_pruned == 0
    assert MemoryEntry.objects.count() == len(aged)
    assert not events(MemoryEvent.Action.PRUNED)


# --- Contradictions ----------------------------------------------------------------------------------


@pytest.fixture
def disagreeing(agent_a, agent_b, memory):  # type: ignore[no-untyped-def]
    """User u1's 'lang' set disagrees across agents and visibilities; everything else agrees."""
    return {
        "u1_a_self": memory(agent_a, "lang", "English", user="u1"),
        "u1_b_global": memory(agent_b, "lang", "German", user="u1", visibility="global"),
        "u1_b_group": memory(agent_b, "lang", "English", user="u1", visibility="group", groups=["team"]),
        "u1_color": memory(agent_a, "color", "blue", user="u1"),
        "u2_a": memory(agent_a, "lang", "English", user="u2"),
        "u2_b": memory(agent_b, "lang", "English", user="u2", visibility="global"),
        # The same JSON written with its keys in another order agrees.
        "u3_a": memory(agent_a, "prefs", {"a": 1, "b": [1, 2]}, user="u3"),
        "u3_b": memory(agent_b, "prefs", {"b": [1, 2], "a": 1}, user="u3", visibility="global"),
    }


def flagged_ids() -> set[int]:
    return ids(MemoryEntry.objects.filter(conflicted=True))


def test_contradictions_are_flagged_across_agents_and_visibilities_for_that_user_only(disagreeing):
    result = dream_detect_contradictions(agent_ids=None, batching=Batching(size=2))

    u1_lang = {disagreeing[k].id for k in ("u1_a_self", "u1_b_global", "u1_b_group")}
    assert flagged_ids() == u1_lang
    assert (result.contradictions, result.flagged, result.unflagged) == (1, 3, 0)
    flagged = events(MemoryEvent.Action.FLAGGED)
    assert {e.entry_id for e in flagged} == u1_lang
    assert {e.new_value for e in flagged} == {"English", "German"}

    # A second pass finds nothing new.
    again = dream_detect_contradictions(agent_ids=None)
    assert (again.contradictions, again.flagged, again.unflagged) == (0, 0, 0)


def test_contradictions_scope_is_the_agents_own_entries_without_cross_agent(disagreeing, agent_a):
    result = dream_detect_contradictions(agent_ids=[agent_a.id])

    assert flagged_ids() == {disagreeing["u1_a_self"].id}  # compared with B's entries, but only A's flagged
    assert result.flagged == 1


def test_flag_is_cleared_when_the_set_agrees_again(disagreeing):
    dream_detect_contradictions(agent_ids=None)
    MemoryEntry.objects.filter(id=disagreeing["u1_b_global"].id).update(value="English", value_text="English")

    result = dream_detect_contradictions(agent_ids=None)

    assert flagged_ids() == set()
    assert result.unflagged == 3 and result.flagged == 0
    assert len(events(MemoryEvent.Action.UNFLAGGED)) == 3


def test_cycle_prunes_then_flags_only_for_enabled_agents(disagreeing, agent_a, agent_b, dream_policy, memory):
    dream_policy(agent_a, prune_stale_after_days=30)
    dream_policy(agent_b, dream_enabled=False)
    stale = memory(agent_a, "old", updated_days=60, user="u9")
    pruned_before = metric("dream_entries_pruned_total")
    found_before = metric("dream_contradictions_found_total")
    users_before = metric("dream_users_processed_total")
    durations_before = metric("dream_duration_seconds_count")

    run = dream_run_cycle(trigger=DreamRun.Trigger.SCHEDULE)

    run.refresh_from_db()
    assert run.status == DreamRun.Status.SUCCEEDED
    assert run.trigger == DreamRun.Trigger.SCHEDULE
    assert (run.agents_processed, run.entries_pruned, run.contradictions_found) == (1, 1, 1)
    assert run.users_processed == 4  # agent A's entries belong to u1, u2, u3 and u9
    assert run.finished_at is not None and run.finished_at >= run.started_at
    assert not MemoryEntry.objects.filter(id=stale.id).exists()
    assert flagged_ids() == {disagreeing["u1_a_self"].id}
    assert run.details["agents"]["agent-a"]["pruned"] == 1
    assert metric("dream_entries_pruned_total") - pruned_before == 1
    assert metric("dream_contradictions_found_total") - found_before == 1
    assert metric("dream_users_processed_total") - users_before == 4
    assert metric("dream_duration_seconds_count") - durations_before == 1


def test_cycle_for_one_agent(agent_a, agent_b, dream_policy, memory):
    dream_policy(agent_a)
    dream_policy(agent_b)
    a_stale = memory(agent_a, "x", updated_days=60)
    b_stale = memory(agent_b, "y", updated_days=60)

    run = dream_run_cycle(agent_id=agent_b.id)

    assert (run.agents_processed, run.entries_pruned, run.only_agent) == (1, 1, "agent-b")
    assert MemoryEntry.objects.filter(id=a_stale.id).exists()
    assert not MemoryEntry.objects.filter(id=b_stale.id).exists()


# --- Dry run -----------------------------------------------------------------------------------------


def snapshot() -> tuple[list[tuple], int]:
    rows = list(
        MemoryEntry.objects.order_by("id").values_list("id", "value_text", "conflicted", "updated_at")
    )
    return rows, MemoryEvent.objects.count()


def test_dry_run_changes_nothing_and_reports_what_the_real_cycle_then_does(
    disagreeing, aged, agent_a, agent_b, dream_policy
):
    # Two cross-agent policies overlap: a dry run must count each entry once, as the real cycle deletes it.
    dream_policy(agent_a, prune_stale_after_days=30, cross_agent_maintenance=True)
    dream_policy(agent_b, prune_stale_after_days=20, cross_agent_maintenance=True)
    MemoryEntry.objects.filter(id=disagreeing["u2_b"].id).update(conflicted=True)  # agrees: to be cleared
    before = snapshot()
    pruned_metric = metric("dream_entries_pruned_total")

    dry = dream_run_cycle(dry_run=True)

    assert snapshot() == before
    assert metric("dream_entries_pruned_total") == pruned_metric
    assert dry.status == DreamRun.Status.SUCCEEDED and dry.dry_run
    assert dry.entries_pruned == 4
    assert (dry.contradictions_found, dry.entries_flagged, dry.entries_unflagged) == (1, 3, 1)

    real = dream_run_cycle()

    assert (real.entries_pruned, real.contradictions_found, real.entries_flagged, real.entries_unflagged) == (
        dry.entries_pruned,
        dry.contradictions_found,
        dry.entries_flagged,
        dry.entries_unflagged,
    )


def test_dry_run_ignores_entries_the_cycle_would_prune_when_counting_contradictions(
    agent_a, agent_b, dream_policy, memory
):
    dream_policy(agent_a, prune_stale_after_days=30)
    memory(agent_a, "lang", "English", updated_days=60)  # stale: pruned before contradictions are looked at
    memory(agent_b, "lang", "German", visibility="global")

    dry = dream_run_cycle(dry_run=True)
    real = dream_run_cycle()

    assert (dry.entries_pruned, dry.contradictions_found) == (1, 0)
    assert (real.entries_pruned, real.contradictions_found) == (1, 0)


# --- Failures and the lock ---------------------------------------------------------------------------


def test_failure_mid_cycle_marks_the_run_failed_and_leaves_no_half_applied_batch(
    agent_a, dream_policy, memory, monkeypatch
):
    dream_policy(agent_a, prune_stale_after_days=30)
    stale = [memory(agent_a, f"k{i}", updated_days=60) for i in range(5)]
    real_delete = store.delete_entries
    calls = []

    def delete_then_fail(*, ids: list[int]) -> None:
        calls.append(ids)
        if len(calls) == 2:
            raise RuntimeError("disk on fire")
        real_delete(ids=ids)

    monkeypatch.setattr(store, "delete_entries", delete_then_fail)
    failed_before = metric("dream_cycles_failed_total")

    with pytest.raises(RuntimeError, match="disk on fire"):
        dream_run_cycle(batch_size=2)

    run = DreamRun.objects.get()
    assert run.status == DreamRun.Status.FAILED
    assert "RuntimeError: disk on fire" in run.error
    assert run.finished_at is not None
    assert run.entries_pruned == 2
    first_batch = set(calls[0])
    left = {e.id for e in stale} - first_batch
    assert ids(MemoryEntry.objects.all()) == left  # batch 2 rolled back whole: its entries remain...
    assert {e.entry_id for e in events(MemoryEvent.Action.PRUNED)} == first_batch  # ...and have no event
    assert metric("dream_cycles_failed_total") - failed_before == 1


def other_session():  # type: ignore[no-untyped-def]
    """A second connection to the test database: another process, as the locks see it."""
    import psycopg

    s = connection.settings_dict
    return psycopg.connect(
        host=s["HOST"], port=s["PORT"] or 5432, user=s["USER"], password=s["PASSWORD"], dbname=s["NAME"]
    )


def close_session(other) -> None:  # type: ignore[no-untyped-def]
    """Close a second connection and wait until its server process has exited: its session's advisory locks
    go with that process, which on a busy machine ends a moment after ``close()`` returns."""
    pid = other.info.backend_pid
    other.close()
    deadline = time.monotonic() + HANG_GUARD_SECONDS
    with connection.cursor() as cursor:
        while True:
            cursor.execute("SELECT pg_stat_clear_snapshot()")  # the view is read once a transaction otherwise
            cursor.execute("SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = %s)", [pid])
            if not cursor.fetchone()[0]:
                return
            assert time.monotonic() < deadline, f"the session {pid} did not end"
            time.sleep(0.01)


def hold_cycle_lock_elsewhere():  # type: ignore[no-untyped-def]
    """What a live cycle in another process looks like to this one."""
    other = other_session()
    other.execute("SELECT pg_advisory_lock(%s, hashtext(%s))", [LockId.DREAM_CYCLE, services.CYCLE_LOCK_KEY])
    return other


def test_a_second_cycle_is_skipped_while_one_runs(agent_a, dream_policy, memory):
    dream_policy(agent_a, prune_stale_after_days=30)
    stale = memory(agent_a, "old", updated_days=60)
    other = hold_cycle_lock_elsewhere()
    try:
        run = dream_run_cycle()
    finally:
        close_session(other)

    assert run.status == DreamRun.Status.SKIPPED
    assert "Another Dream cycle is running" in run.error
    assert run.entries_pruned == 0
    assert MemoryEntry.objects.filter(id=stale.id).exists()

    after = dream_run_cycle()  # the lock went with its holder's connection
    assert after.status == DreamRun.Status.SUCCEEDED and after.entries_pruned == 1


def test_a_run_whose_process_died_does_not_block_the_next(agent_a, dream_policy, memory):
    from django.utils import timezone

    dream_policy(agent_a, prune_stale_after_days=30)
    memory(agent_a, "old", updated_days=60)
    now = timezone.now()  # recorded running a moment ago, but no process holds its run lock
    dead = DreamRun.objects.create(status=DreamRun.Status.RUNNING, started_at=now, heartbeat_at=now)
    dead_dry = DreamRun.objects.create(
        status=DreamRun.Status.RUNNING, dry_run=True, started_at=now, heartbeat_at=now
    )

    run = dream_run_cycle()

    for gone in (dead, dead_dry):
        gone.refresh_from_db()
        assert gone.status == DreamRun.Status.FAILED and "Abandoned" in gone.error
    assert run.status == DreamRun.Status.SUCCEEDED and run.entries_pruned == 1


def test_a_live_run_in_another_process_is_not_taken_for_abandoned(agent_a, dream_policy):
    from django.utils import timezone

    dream_policy(agent_a)
    now = timezone.now()
    live = DreamRun.objects.create(
        status=DreamRun.Status.RUNNING, dry_run=True, started_at=now, heartbeat_at=now
    )
    other = other_session()
    other.execute("SELECT pg_advisory_lock(%s, hashtext(%s))", [LockId.DREAM_RUN, str(live.pk)])
    try:
        run = dream_run_cycle(dry_run=True)
    finally:
        close_session(other)

    live.refresh_from_db()
    assert live.status == DreamRun.Status.RUNNING
    assert run.status == DreamRun.Status.SUCCEEDED


def test_a_cycle_leaves_no_lock_behind(agent_a, dream_policy, memory):
    dream_policy(agent_a, prune_stale_after_days=30)
    memory(agent_a, "old", updated_days=60)
    run = dream_run_cycle()
    other = other_session()
    try:
        free = other.execute(
            "SELECT pg_try_advisory_lock(%s, hashtext(%s)), pg_try_advisory_lock(%s, hashtext(%s))",
            [LockId.DREAM_CYCLE, services.CYCLE_LOCK_KEY, LockId.DREAM_RUN, str(run.pk)],
        ).fetchone()
    finally:
        close_session(other)
    assert free == (True, True)


def test_dry_runs_do_not_take_the_lock(agent_a, dream_policy, memory):
    dream_policy(agent_a)
    memory(agent_a, "old", updated_days=60)
    other = hold_cycle_lock_elsewhere()
    try:
        dry = dream_run_cycle(dry_run=True)
    finally:
        close_session(other)

    assert dry.status == DreamRun.Status.SUCCEEDED and dry.entries_pruned == 1


def test_batch_size_is_bounded():
    with pytest.raises(ValueError, match="batch size"):
        Batching.from_settings(size=0)
    with pytest.raises(ValueError, match="batch size"):
        Batching.from_settings(size=services.MAX_BATCH_SIZE + 1)


@pytest.mark.django_db
def test_cycle_deletes_turn_counters_of_turns_over_a_day_old(agent_a):
    from datetime import timedelta

    from django.utils import timezone

    from dream.services import dream_run_cycle
    from usermemory.models import TurnWriteCount

    now = timezone.now()
    TurnWriteCount.objects.create(
        agent=agent_a, user_id="u", turn_id="old", window_start=now - timedelta(days=2), count=3
    )
    TurnWriteCount.objects.create(agent=agent_a, user_id="u", turn_id="live", window_start=now, count=1)
    run = dream_run_cycle(trigger="manual")
    assert list(TurnWriteCount.objects.values_list("turn_id", flat=True)) == ["live"]
    assert run.details["turnCountersDeleted"] == 1
