"""One settings file for every process (issue 46): the checkout's ``.env``, or the file ``ENV_FILE`` names, is
read by manage.py and the WSGI and ASGI apps whatever their current directory, and a variable set in
the environment wins over it. (The stdio MCP server and ``extract_conversations`` reaching the LLM through it:
tests/agenttools/test_settings_file.py.)"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PRINT_LLM = "from django.conf import settings; print(f'{settings.LLM_PROVIDER}|{settings.LLM_MODEL}')"


def _environment(**extra: str) -> dict[str, str]:
    """This process's environment without the settings the file under test holds, plus ``extra``."""
    held = ("LLM_", "SECRET_KEY", "PUBLIC_ID_KEY", "ENV_FILE")
    return {k: v for k, v in os.environ.items() if not k.startswith(held)} | extra


def _run(argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 (our own interpreter, fixed arguments)
        [sys.executable, *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False
    )


def _manage_shell(env: dict[str, str], cwd: Path, code: str = PRINT_LLM) -> str:
    result = _run([str(ROOT / "manage.py"), "shell", "--no-imports", "-c", code], env, cwd)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout.strip()


@pytest.fixture
def elsewhere(tmp_path: Path) -> Path:
    """A working directory outside the checkout, as an MCP client's or a service manager's."""
    directory = tmp_path / "elsewhere"
    directory.mkdir()
    return directory


@pytest.fixture
def env_file(tmp_path: Path) -> Path:
    path = tmp_path / "settings.env"
    path.write_text("SECRET_KEY=from-the-file\nLLM_PROVIDER=openai\nLLM_MODEL=from-the-file\n")
    return path


def test_manage_py_reads_the_file_from_any_directory(env_file: Path, elsewhere: Path):
    assert _manage_shell(_environment(ENV_FILE=str(env_file)), elsewhere) == "openai|from-the-file"


def test_an_environment_variable_wins_over_the_file(env_file: Path, elsewhere: Path):
    env = _environment(ENV_FILE=str(env_file), LLM_MODEL="from-the-environment")
    assert _manage_shell(env, elsewhere) == "openai|from-the-environment"
    env = _environment(ENV_FILE=str(env_file), LLM_PROVIDER="")  # set, even empty: the environment's
    assert _manage_shell(env, elsewhere) == "|from-the-file"


def test_the_last_line_of_a_name_wins(env_file: Path, elsewhere: Path):
    """The README's recipe appends to .env: written twice, the later value is the one used."""
    env_file.write_text(env_file.read_text() + "LLM_MODEL=written-later\n")
    assert _manage_shell(_environment(ENV_FILE=str(env_file)), elsewhere) == "openai|written-later"


def test_a_relative_env_file_is_taken_from_the_checkout(env_file: Path, elsewhere: Path):
    relative = os.path.relpath(env_file, ROOT)
    assert not (elsewhere / relative).exists()  # from the working directory, the path names nothing
    assert _manage_shell(_environment(ENV_FILE=relative), elsewhere) == "openai|from-the-file"


@pytest.mark.parametrize("module", ["config.wsgi", "config.asgi"])
def test_the_web_apps_read_the_file(env_file: Path, elsewhere: Path, module: str):
    """What a WSGI server or uvicorn imports first."""
    env = _environment(ENV_FILE=str(env_file), PYTHONPATH=str(ROOT))
    env.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    result = _run(["-c", f"import {module}\n{PRINT_LLM}"], env, elsewhere)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1] == "openai|from-the-file"


def test_the_checkouts_env_is_read_from_any_directory(elsewhere: Path):
    """Without ENV_FILE: the .env beside manage.py (``make run`` writes its SECRET_KEY there), not one in the
    working directory."""
    dotenv = ROOT / ".env"
    lines = dotenv.read_text().splitlines() if dotenv.is_file() else []
    secrets = [line.partition("=")[2] for line in lines if line.startswith("SECRET_KEY=")]
    if not secrets:
        pytest.skip("the checkout has no .env with a SECRET_KEY (make test writes one)")
    (elsewhere / ".env").write_text("SECRET_KEY=from-the-working-directory\n")
    code = "from django.conf import settings; print(settings.SECRET_KEY)"
    assert _manage_shell(_environment(), elsewhere, code) == secrets[-1]


def test_env_file_naming_a_missing_file_stops_the_start(tmp_path: Path, elsewhere: Path):
    missing = tmp_path / "no-such.env"
    result = _run([str(ROOT / "manage.py"), "check"], _environment(ENV_FILE=str(missing)), elsewhere)
    assert result.returncode != 0
    assert f"ImproperlyConfigured: ENV_FILE names {missing}, which does not exist." in result.stderr


def test_without_a_secret_key_the_error_names_the_file_read(tmp_path: Path, elsewhere: Path):
    env_file = tmp_path / "no-secret.env"
    env_file.write_text("LLM_PROVIDER=openai\n")
    result = _run([str(ROOT / "manage.py"), "check"], _environment(ENV_FILE=str(env_file)), elsewhere)
    assert result.returncode != 0
    assert f"SECRET_KEY is not set. Put it in the environment or in {env_file}" in result.stderr
