"""The built wheel is the whole project: it holds every app of INSTALLED_APPS with its migrations and
templates, installs into a fresh virtualenv, and ``django-admin migrate`` runs from there against a DATA_DIR
of its own.

The shared dev virtualenv has an editable install whose ``.pth`` puts a source tree on ``sys.path``, so the
fresh one must not see it: its site-packages gets the wheel, then a ``.pth`` naming the dev site-packages for
the dependencies. A directory named in a ``.pth`` is only appended to ``sys.path`` (its own ``.pth`` files,
the editable install's among them, are not run), and ``-I`` keeps the working directory and ``PYTHONPATH``
out.
The test then asks the installed Django where each app was loaded from.

The build goes through pip with build isolation (setuptools from pip's configured index), in a copy of the
sources, so no ``build/`` or ``*.egg-info`` lands in the checkout.
"""

import json
import os
import shutil
import signal
import site
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.memoryplatform.test_embedded_db import processes_using
from tests.memoryplatform.test_layout import ROOT, local_apps

TIMEOUT_SECONDS = 180
PIP = [sys.executable, "-m", "pip"]
WHERE_FROM = """
import importlib
import json
import django
from django.apps import apps
from django.conf import settings
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.template.loader import get_template

django.setup()
executor = MigrationExecutor(connection)
plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
print(json.dumps({
    "paths": {config.name: config.path for config in apps.get_app_configs()},
    "unapplied": [str(migration) for migration, _ in plan],
    "applied": len(executor.loader.applied_migrations),
    "settings": importlib.import_module(settings.SETTINGS_MODULE).__file__,
    "templates": {
        name: get_template(name).origin.name for name in ("admin/base_site.html", "admin/overview.html")
    },
}))
"""


def run(argv: list[str], **options) -> subprocess.CompletedProcess:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_SECONDS, **options)  # noqa: S603
    assert done.returncode == 0, f"{' '.join(argv)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done


def packages() -> list[str]:
    """What the wheel must hold: every app of INSTALLED_APPS, and ``config``, the settings and the wiring."""
    return [*local_apps(), "config"]


def source_files(app: str) -> set[str]:
    """The files of an app's package, as paths inside a wheel (``app/...``)."""
    return {
        str(path.relative_to(ROOT))
        for path in (ROOT / app).rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
    }


def build_wheel(base: Path) -> Path:
    """Build the wheel from a copy of the sources: pyproject.toml, the README it names, every package."""
    source = base / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    shutil.copytree(ROOT / "templates", source / "templates")  # the project's own, installed as data
    for app in packages():
        shutil.copytree(ROOT / app, source / app, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    run([*PIP, "wheel", "--no-deps", "--quiet", "--wheel-dir", str(base / "dist"), str(source)])
    (wheel,) = (base / "dist").glob("memoryplatform-*.whl")
    return wheel


def install(base: Path, wheel: Path) -> tuple[Path, Path]:
    """A fresh virtualenv with the wheel installed, then given the dev site-packages for the dependencies:
    (its python, its site-packages)."""
    run([sys.executable, "-m", "venv", "--without-pip", str(base / "venv")])
    python = base / "venv" / "bin" / "python"
    # Installed before the .pth exists: pip sees no other memoryplatform, so it touches nothing outside.
    run([*PIP, "--python", str(python), "install", "--no-deps", "--no-index", "--quiet", str(wheel)])
    where = run([str(python), "-I", "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"])
    purelib = Path(where.stdout.strip())
    (purelib / "dev-dependencies.pth").write_text("".join(f"{path}\n" for path in site.getsitepackages()))
    return python, purelib


@pytest.fixture
def base() -> Iterator[Path]:
    # Not under pytest's tmp_path: when the suite runs as root the embedded server runs as a system user,
    # which must reach its DATA_DIR (see test_embedded_db.py).
    path = Path(tempfile.mkdtemp(prefix="mp-wheel-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        for pid in processes_using(path):  # the server stops after its last user; this is for a failed run
            os.kill(pid, signal.SIGKILL)
        shutil.rmtree(path, ignore_errors=True)


@pytest.mark.wheel
def test_the_wheel_holds_every_app_installs_and_migrates_from_its_own_files(base: Path) -> None:
    wheel = build_wheel(base)
    names = set(zipfile.ZipFile(wheel).namelist())
    for app in packages():
        missing = source_files(app) - names
        assert not missing, f"{app}: not in the wheel: {sorted(missing)}"
    assert any(name.startswith("usermemory/migrations/0001_") for name in names)
    assert any(name.startswith("usermemory/templates/admin/") for name in names)
    project_templates = {
        str(path.relative_to(ROOT / "templates")) for path in (ROOT / "templates").rglob("*.html")
    }
    data = "memoryplatform-0.1.0.data/data/share/memoryplatform/templates/"
    assert project_templates and {data + name for name in project_templates} <= names

    python, purelib = install(base, wheel)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(base),
        "SECRET_KEY": "wheel-test",
        "DATA_DIR": str(base / "data"),  # the embedded PostgreSQL, a server of its own
        "DJANGO_SETTINGS_MODULE": "config.settings",
    }
    # django-admin, as the installed wheel's python runs it, from outside any checkout.
    run(
        [str(python), "-I", "-m", "django", "migrate", "--settings", "config.settings", "--noinput"],
        cwd=base,
        env=env,
    )
    state = json.loads(run([str(python), "-I", "-c", WHERE_FROM], cwd=base, env=env).stdout)

    assert state["unapplied"] == []
    assert state["applied"] > 0
    for app in local_apps():
        assert Path(state["paths"][app]) == purelib / app
    assert state["settings"] == str(purelib / "config" / "settings.py")
    # The project's own templates (the admin's frame and overview) come from the wheel's data, not a checkout.
    shared = base / "venv" / "share" / "memoryplatform" / "templates"
    assert state["templates"] == {
        name: str(shared / name) for name in ("admin/base_site.html", "admin/overview.html")
    }
