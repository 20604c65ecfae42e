"""The background duty cycle (memoryplatform/duty.py): background work rests after each unit while the node is
busy with others' work, never on an idle node, and the settings are checked at start-up."""

import sys

import pytest
from django.core.checks import run_checks
from prometheus_client import REGISTRY

from memoryplatform import duty
from memoryplatform.duty import MAX_REST_SECONDS, DutyCycle


class Node:
    """A node whose clock, CPU counters and sleeps the test drives: ``others`` cores busy with others' work
    and this process using ``own`` cores while time passes."""

    def __init__(self, *, others: float, own: float = 1.0, readable: bool = True) -> None:
        self.now = 0.0
        self.node_cpu = 0.0
        self.own_cpu = 0.0
        self.others, self.own, self.readable = others, own, readable
        self.slept: list[float] = []

    def work(self, seconds: float) -> None:
        self.now += seconds
        self.own_cpu += self.own * seconds
        self.node_cpu += (self.own + self.others) * seconds

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds
        self.node_cpu += self.others * seconds

    def cycle(self, duty_share: float, busy_cores: float = 0.1) -> DutyCycle:
        return DutyCycle(
            duty=duty_share,
            busy_cores=busy_cores,
            node=lambda: self.node_cpu if self.readable else None,
            own=lambda: self.own_cpu,
            clock=lambda: self.now,
            sleep=self.sleep,
        )


def rested_total() -> float:
    return REGISTRY.get_sample_value("background_rested_seconds_total") or 0.0


def test_a_busy_node_gets_the_rest_of_the_time():
    before = rested_total()
    node = Node(others=1.0)
    cycle = node.cycle(0.25)
    node.work(2.0)
    assert cycle.rest(2.0) == pytest.approx(6.0)  # 2 s of work is a quarter of 8 s
    node.work(1.0)
    assert cycle.rest(1.0) == pytest.approx(3.0)
    assert node.slept == pytest.approx([6.0, 3.0])
    assert cycle.rested == pytest.approx(9.0)
    assert rested_total() - before == pytest.approx(9.0)  # the metric operators read


def test_an_idle_node_never_waits():
    node = Node(others=0.02)  # the database's housekeeping, nothing more
    cycle = node.cycle(0.25)
    for _ in range(3):
        node.work(2.0)
        assert cycle.rest(2.0) == 0.0
    assert node.slept == []


def test_its_own_cpu_is_not_others_work():
    node = Node(others=0.0, own=2.0)  # the model on both cores: the node is busy, but only with this work
    cycle = node.cycle(0.5)
    node.work(3.0)
    assert cycle.others_busy() == pytest.approx(0.0)
    assert cycle.rest(3.0) == 0.0


def test_the_window_starts_after_the_last_rest():
    """Requests during a rest do not make the next unit rest; requests during it do."""
    node = Node(others=0.0)
    cycle = node.cycle(0.5)
    node.work(1.0)
    assert cycle.rest(1.0) == 0.0
    node.others = 1.0
    node.work(1.0)
    assert cycle.rest(1.0) == pytest.approx(1.0)
    node.others = 0.0
    node.work(1.0)
    assert cycle.rest(1.0) == 0.0


def test_an_unreadable_node_counts_as_busy():
    node = Node(others=0.0, readable=False)
    cycle = node.cycle(0.5)
    node.work(2.0)
    assert cycle.rest(2.0) == pytest.approx(2.0)


def test_duty_one_never_rests_and_one_rest_is_bounded():
    node = Node(others=2.0)
    never = node.cycle(1.0)
    node.work(5.0)
    assert never.rest(5.0) == 0.0
    bounded = node.cycle(0.1)
    node.work(30.0)
    assert bounded.rest(30.0) == MAX_REST_SECONDS


def test_work_times_the_block_and_rests_after_it():
    node = Node(others=1.0)
    cycle = node.cycle(0.5)
    with cycle.work():
        node.work(0.5)
    assert node.slept == pytest.approx([0.5])


def test_a_block_is_judged_by_its_own_window_whatever_another_thread_did():
    """The background process's threads (the consumer, Dream) share one cycle: another thread's rest in the
    middle of a block does not cut the block's window."""
    node = Node(others=1.0)
    cycle = node.cycle(0.5)
    with cycle.work():
        node.work(1.0)  # requests during the first half
        node.others = 0.0
        cycle.rest(0.0)  # another thread's unit ends here: no work, no rest, the mark moves
        node.work(1.0)
    assert node.slept == pytest.approx([2.0])  # half a core busy over the block: it rests


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/stat is Linux's")
def test_the_node_cpu_is_read_from_linux():
    first = duty.node_busy_seconds()
    sum(i * i for i in range(200_000))  # some CPU
    second = duty.node_busy_seconds()
    assert first is not None and second is not None
    assert second >= first > 0


def test_paced_is_nothing_outside_a_background_process(monkeypatch, settings):
    monkeypatch.setattr(duty, "_process", None)
    settings.BACKGROUND_DUTY = 0.01
    with duty.paced():
        pass  # no rest: nothing made this process a background one


def test_paced_follows_the_settings_in_a_background_process(monkeypatch, settings):
    node = Node(others=1.0)
    monkeypatch.setattr(duty, "_process", node.cycle(1.0))
    settings.BACKGROUND_DUTY, settings.BACKGROUND_BUSY_CORES = 0.5, 0.1
    with duty.paced():
        node.work(0.2)
    assert node.slept == pytest.approx([0.2])
    settings.BACKGROUND_DUTY = 1.0  # as the suite runs: background work never rests
    with duty.paced():
        node.work(0.2)
    assert node.slept == pytest.approx([0.2])


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("BACKGROUND_DUTY", 0.0, "BACKGROUND_DUTY must be more than 0 and at most 1, got 0.0"),
        ("BACKGROUND_DUTY", 1.5, "BACKGROUND_DUTY must be more than 0 and at most 1, got 1.5"),
        ("BACKGROUND_BUSY_CORES", -1.0, "BACKGROUND_BUSY_CORES must be 0 or more, got -1.0"),
    ],
)
def test_a_wrong_setting_fails_the_system_check(settings, name, value, message):
    setattr(settings, name, value)
    errors = [e for e in run_checks() if e.id == "memoryplatform.E014"]
    assert [e.msg for e in errors] == [message]
