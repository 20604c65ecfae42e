"""The Celery app. Broker and schedule come from settings (REDIS_URL, DREAM_SCHEDULE)."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryplatform.settings")

app = Celery("memoryplatform")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
