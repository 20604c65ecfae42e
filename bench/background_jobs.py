"""The no-op jobs of ``bench.background_ways``: one for procrastinate, one for django-tasks' database backend
(neither is a dependency of the platform: the bench installs them apart, see its docstring)."""

import os

import procrastinate
from django_tasks import task

CONNINFO = os.environ.get("PROCRASTINATE_CONNINFO", "")
procrastinate_app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=CONNINFO))


@procrastinate_app.task(name="bench.noop")
def procrastinate_noop() -> None:
    """Nothing: the job's cost is the queue's."""


@task()
def tasks_noop() -> None:
    """Nothing: the job's cost is the queue's."""
