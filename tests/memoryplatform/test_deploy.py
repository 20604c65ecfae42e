"""No Docker engine runs here, so check what can be checked: the compose file parses, every service's
command names a real entry point of this project, and Prometheus scrapes the services that exist."""

import importlib
import json
import shlex
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def _argv(command: str | list[str]) -> list[str]:
    if isinstance(command, list):
        return command
    argv = shlex.split(command)
    if argv[:2] == ["sh", "-c"]:  # a shell chain: check the last program it runs
        return shlex.split(argv[2].split("&&")[-1])
    return argv


def test_compose_has_every_production_service(compose):
    assert set(compose["services"]) == {
        "postgres",
        "db-replica",
        "pgbouncer",
        "redis",
        "web",
        "worker",
        "beat",
        "prometheus",
    }
    worker = _argv(compose["services"]["worker"]["command"])
    assert worker[:5] == ["celery", "-A", "config", "worker", "-Q"]
    queues = set(worker[5].split(","))
    from memoryplatform.taskmetrics import QUEUES

    assert queues == set(QUEUES)  # every queue a task is routed to has a worker
    assert _argv(compose["services"]["beat"]["command"])[:4] == ["celery", "-A", "config", "beat"]
    assert compose["services"]["redis"]["image"].startswith("redis:")
    for name in ("web", "worker", "beat"):
        service = compose["services"][name]
        assert service["build"] == "."
        env = service["environment"]
        assert env["DATABASE_URL"].startswith("postgres://") and env["REDIS_URL"] == "redis://redis:6379/0"
        assert "SECRET_KEY" in env and "DREAM_SCHEDULE" in env
        assert service["depends_on"]["redis"]["condition"] == "service_healthy"
    for name in ("worker", "beat"):  # after the web's migrate: beat's schedule is a table
        assert compose["services"][name]["depends_on"]["web"]["condition"] == "service_healthy"
    assert (ROOT / "Dockerfile").exists()


def test_the_web_goes_through_pgbouncer_and_listens_past_it(compose):
    """The web's DATABASE_URL is PgBouncer in transaction mode, declared (DATABASE_POOLER); its listen URL and
    its migrations go straight to PostgreSQL, as do the worker and beat (session advisory locks)."""
    assert compose["services"]["pgbouncer"]["environment"]["POOL_MODE"] == "transaction"
    web = compose["services"]["web"]["environment"]
    assert "@pgbouncer:" in web["DATABASE_URL"] and web["DATABASE_POOLER"] == "pgbouncer"
    assert "@postgres:" in web["DATABASE_LISTEN_URL"]
    assert "DATABASE_URL=$$DATABASE_LISTEN_URL" in compose["services"]["web"]["command"].split("migrate")[0]
    for name in ("worker", "beat"):
        assert "@postgres:" in compose["services"][name]["environment"]["DATABASE_URL"]
        assert not compose["services"][name]["environment"].get("DATABASE_POOLER")


def test_the_replica_streams_from_postgres_and_every_process_names_it(compose):
    """db-replica is a base backup of postgres that streams from it (its recovery config written by
    pg_basebackup -R), the primary's image; postgres lets it connect for replication."""
    replica = compose["services"]["db-replica"]
    script = replica["command"][-1]
    assert "pg_basebackup --host postgres" in script and "--write-recovery-conf" in script
    assert "hot_standby=on" in script
    assert replica["image"] == compose["services"]["postgres"]["image"]
    mounts = compose["services"]["postgres"]["volumes"]
    assert any(m.startswith("./deploy/postgres-replication.sh:/docker-entrypoint-initdb.d/") for m in mounts)
    assert "host replication all all" in (ROOT / "deploy/postgres-replication.sh").read_text()
    for name in ("web", "worker", "beat"):
        env = compose["services"][name]["environment"]
        assert "@db-replica:5432/" in env["DATABASE_REPLICA_URL"]


def test_web_command_serves_the_asgi_app(compose):
    """The web service runs ``manage.py serve`` (the worker and beat services run the background work), whose
    uvicorn command names the real ASGI app; the image's default command is the same."""
    argv = _argv(compose["services"]["web"]["command"])
    assert argv[:3] == ["python", "manage.py", "serve"]
    assert "--no-background" in argv
    assert "python manage.py migrate" in compose["services"]["web"]["command"]
    dockerfile_cmd = next(
        line for line in (ROOT / "Dockerfile").read_text().splitlines() if line.startswith("CMD")
    )
    assert json.loads(dockerfile_cmd[3:])[:3] == ["python", "manage.py", "serve"]

    from memoryplatform.management.commands.serve import uvicorn_argv

    served = uvicorn_argv(host="0.0.0.0", port=8000, workers=4)  # noqa: S104
    assert served[1:3] == ["-m", "uvicorn"]
    module, _, attr = served[3].partition(":")
    assert callable(getattr(importlib.import_module(module), attr))


def test_the_wsgi_app_still_loads():
    """Django's own WSGI app (``WSGI_APPLICATION``: runserver)."""
    from config.wsgi import application

    assert callable(application)


def test_prometheus_scrapes_web_worker_and_beat(compose):
    config = yaml.safe_load((ROOT / "deploy" / "prometheus.yml").read_text())
    targets = {t for job in config["scrape_configs"] for c in job["static_configs"] for t in c["targets"]}
    assert targets == {"web:8000", "worker:9100", "beat:9101"}
    web_job = next(job for job in config["scrape_configs"] if job["job_name"] == "memoryplatform-web")
    assert web_job["authorization"]["type"] == "Bearer"
    assert compose["services"]["worker"]["environment"]["WORKER_METRICS_PORT"] == "9100"
    assert compose["services"]["beat"]["environment"]["BEAT_METRICS_PORT"] == "9101"


def test_env_example_lists_every_setting_the_code_reads():
    documented = {
        line.split("=", 1)[0]
        for line in (ROOT / ".env.example").read_text().splitlines()
        if line and not line.startswith("#")
    }
    import re

    read = set()
    for path in [
        *ROOT.glob("memoryplatform/*.py"),
        *ROOT.glob("*/management/commands/*.py"),
        ROOT / "config/celery.py",
    ]:
        read |= set(re.findall(r'env\.\w+\("([A-Z_]+)"', path.read_text()))
        read |= set(re.findall(r'_strict_bool\("([A-Z_]+)"', path.read_text()))
        read |= set(re.findall(r'environ\.get\("([A-Z_]+)"', path.read_text()))
    read.discard("DJANGO_SETTINGS_MODULE")
    assert read <= documented, read - documented
