"""The Celery candidate of ``bench.background_ways``: a worker and beat as the platform ran them before issue
48 (the platform loaded, Redis the broker and result store, beat sending three jobs every 300 s), kept here
since the platform's own Celery app is gone. Celery is not a dependency of the platform: the bench installs it
apart (see ``bench.background_ways``)."""

import os

import django
from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django.setup()  # what the platform's worker loaded: every app, the models, the settings

REDIS = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
app = Celery("bench", broker=REDIS, backend=REDIS)
app.conf.update(task_serializer="json", result_serializer="json", accept_content=["json"])
app.conf.worker_prefetch_multiplier = 1
app.conf.beat_schedule = {
    name: {"task": "celery.accumulate", "schedule": 300.0, "args": [1]}
    for name in ("dream-cycle", "reembed", "extraction")
}
