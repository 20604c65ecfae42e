"""The composition root: settings, the URL map, the ASGI and WSGI apps, and the pieces that
wire the apps together (the middleware that asks apikeys for a key, the staff overview). It may import every
app; no app imports it (the import-linter contracts in pyproject.toml)."""

# Before anything reads a setting: every process (manage.py and its commands, the WSGI and ASGI apps)
# imports this package first, so each one reads the same settings file (memoryplatform/envfile.py).
from memoryplatform.envfile import load_env_file

load_env_file()

# The Celery app, loaded with Django (as cookiecutter-django does), so that @shared_task binds to it.
from config.celery import app as celery_app  # noqa: E402

__all__ = ["celery_app"]
