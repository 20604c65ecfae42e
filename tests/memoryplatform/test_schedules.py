"""beat's schedule in the database: seeded on migrate from the settings, the admin's after that; and a real
beat beside a real worker, on each broker, sweeping the vector queue of a text whose nudge never reached a
broker, its last run and the queues' depth on /metrics."""

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import override_settings
from django.urls import reverse
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from memoryplatform.schedules import schedules_seed
from tests.helpers import celery_worker, internal_id, publishing_to, url_of_the_test_database
from usermemory.models import EntryEmbedding

ROOT = Path(settings.BASE_DIR)
LONG = "the user spends every summer walking the coast path from Porto to Santiago, " * 2


@pytest.mark.django_db
def test_migrate_seeds_every_apps_schedule_from_the_settings():
    tasks = dict(PeriodicTask.objects.values_list("name", "task"))
    assert tasks == {
        "dream-cycle": "dream.run_cycle",
        "vectors-sweep": "vectors.drain",
        "vectors-reembed": "vectors.reembed",
        "extraction-background": "extraction.run_background",
        "broker-prune": "housekeeping.prune_broker",
        "webhooks-sweep": "webhooks.deliver_due",
        "events-prune": "events.prune",
    }
    dream = PeriodicTask.objects.get(name="dream-cycle")
    fields = (dream.crontab.minute, dream.crontab.hour, dream.crontab.day_of_month)
    fields += (dream.crontab.month_of_year, dream.crontab.day_of_week)
    assert " ".join(fields) == settings.DREAM_SCHEDULE
    sweep = PeriodicTask.objects.get(name="vectors-sweep")
    assert (sweep.interval.every, sweep.interval.period) == (settings.EMBEDDINGS_SWEEP_INTERVAL, "seconds")
    # No LLM here: the extraction's schedule is there, turned off.
    assert PeriodicTask.objects.get(name="extraction-background").enabled is bool(settings.LLM_PROVIDER)


@pytest.mark.django_db
def test_a_schedule_missing_is_seeded_again_from_its_setting():
    PeriodicTask.objects.filter(name="webhooks-sweep").delete()
    with override_settings(WEBHOOKS_SWEEP_INTERVAL=15):
        schedules_seed()
    sweep = PeriodicTask.objects.get(name="webhooks-sweep")
    assert sweep.task == "webhooks.deliver_due"
    assert (sweep.interval.every, sweep.interval.period) == (15, "seconds")


@pytest.mark.django_db
def test_staff_change_a_schedule_in_the_admin_and_a_later_migrate_keeps_it(client):
    client.force_login(User.objects.create_superuser("boss", "boss@example.com", "pw-for-tests-only"))
    task = PeriodicTask.objects.get(name="dream-cycle")
    assert client.get(reverse("admin:django_celery_beat_periodictask_changelist")).status_code == 200
    change = reverse("admin:django_celery_beat_periodictask_change", args=[task.pk])
    assert "dream.run_cycle" in client.get(change).content.decode()
    PeriodicTask.objects.filter(pk=task.pk).update(enabled=False)  # what the admin's "Disable" action writes

    assert schedules_seed() == []  # what post_migrate runs: every schedule exists, none is written again

    assert PeriodicTask.objects.get(name="dream-cycle").enabled is False


@pytest.mark.django_db(transaction=True)
def test_beat_sweeps_what_no_nudge_reached_and_metrics_show_its_last_run(
    broker, agent_a_api, client, tmp_path
):
    """The write's nudge goes nowhere (this process's broker is its memory); beat's sweep, every second here,
    sends ``vectors.drain`` and the worker embeds the text. /metrics then says when beat last sent it and how
    deep each queue is."""
    every_second, _ = IntervalSchedule.objects.get_or_create(every=1, period=IntervalSchedule.SECONDS)
    PeriodicTask.objects.filter(name="vectors-sweep").update(interval=every_second, expire_seconds=None)
    PeriodicTask.objects.exclude(name="vectors-sweep").update(enabled=False)
    body = {"userId": "u-sweep", "key": "summer", "value": LONG}
    response = agent_a_api.put("/usermemorystore/memories", body, format="json")
    assert response.status_code == 201, response.content
    entry = internal_id(response.json()["id"])

    env = {**os.environ, "DATABASE_URL": url_of_the_test_database(), "SECRET_KEY": "beat-test"}
    env |= broker.env
    env.pop("CELERY_BROKER_URL", None)
    beat_log = tmp_path / "beat.log"
    with celery_worker(tmp_path / "worker.log", broker) as worker, beat_log.open("w") as out:
        beat = subprocess.Popen(  # noqa: S603
            [sys.executable, "-m", "celery", "-A", "config", "beat", "-l", "INFO"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + 120
            while not EntryEmbedding.objects.filter(entry_id=entry).exists():
                assert beat.poll() is None, beat_log.read_text()[-3000:]
                assert time.monotonic() < deadline, f"no sweep in 120 s:\n{worker.log.read_text()[-3000:]}"
                time.sleep(0.2)
        finally:
            beat.terminate()
            beat.wait(timeout=30)
    assert "Sending due task vectors-sweep (vectors.drain)" in beat_log.read_text()
    assert PeriodicTask.objects.get(name="vectors-sweep").last_run_at is not None

    with publishing_to(broker):
        metrics = client.get("/metrics").content.decode()  # the test client comes from 127.0.0.1
    last_run = r'^celery_beat_last_run_timestamp_seconds\{schedule="vectors-sweep"\} [0-9.e+]+$'
    assert re.search(last_run, metrics, re.M), metrics[-2000:]
    assert re.search(r'^celery_queue_depth\{queue="vectors"\} [0-9.e+]+$', metrics, re.M), metrics[-2000:]
