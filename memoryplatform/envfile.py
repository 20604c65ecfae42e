"""The one file of settings that every process of the platform reads: ``.env`` in the checkout (beside
``manage.py``), whatever the current directory, or the file ``ENV_FILE`` names (a relative path is taken
from the checkout, as ``DATA_DIR`` is). A variable set in the environment, even empty, wins over the file.

Every process imports the ``memoryplatform`` package before it reads a setting, and the package reads the
file first (``memoryplatform/__init__.py``): ``manage.py`` and each of its commands (``serve`` and the
uvicorn workers it starts, the stdio MCP server ``mcp``, ``dream``, ``extract_conversations``, ...),
``config.wsgi`` and ``config.asgi``.
"""

import io
import os
from pathlib import Path

import environ
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent
VARIABLE = "ENV_FILE"

_loaded = False
_read: Path | None = None


def env_file_path() -> Path:
    """The settings file: ``ENV_FILE`` when set (relative: to the checkout), else the checkout's ``.env``."""
    named = os.environ.get(VARIABLE, "")
    path = Path(named) if named else BASE_DIR / ".env"
    return path if path.is_absolute() else BASE_DIR / path


def load_env_file() -> Path | None:
    """Put the settings file's variables into ``os.environ``, each one the environment does not already have.
    Once per process; returns the file read, or None when there is no ``.env`` (the environment alone, as in
    a container). ``ENV_FILE`` naming a file that is missing or cannot be read stops the start, naming it."""
    global _loaded, _read
    if _loaded:
        return _read
    path = env_file_path()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        if os.environ.get(VARIABLE):
            raise ImproperlyConfigured(f"{VARIABLE} names {path}, which does not exist.") from None
        text = None
    except (OSError, UnicodeError) as exc:
        raise ImproperlyConfigured(f"Cannot read the settings file {path}: {exc}") from None
    if text is not None:
        environ.Env.read_env(io.StringIO(text), overwrite=False)
    _loaded, _read = True, (path if text is not None else None)
    return _read
