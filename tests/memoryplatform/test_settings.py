"""Boolean settings are parsed strictly: a typo stops the start, naming the variable, instead of becoming
False."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from config.settings import _strict_bool

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = (ROOT / "config" / "settings.py").read_text()
BOOLEANS = sorted(set(re.findall(r'_strict_bool\("([A-Z_]+)"', SETTINGS)))


@pytest.mark.parametrize("raw", ["true", "True", "1", "yes", "YES", "on", " on "])
def test_the_true_spellings(monkeypatch, raw):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("MP_TEST_FLAG", raw)
    assert _strict_bool("MP_TEST_FLAG", False) is True


@pytest.mark.parametrize("raw", ["false", "FALSE", "0", "no", "off", " Off "])
def test_the_false_spellings(monkeypatch, raw):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("MP_TEST_FLAG", raw)
    assert _strict_bool("MP_TEST_FLAG", True) is False


@pytest.mark.parametrize("default", [True, False])
def test_unset_or_empty_is_the_default(monkeypatch, default):  # type: ignore[no-untyped-def]
    monkeypatch.delenv("MP_TEST_FLAG", raising=False)
    assert _strict_bool("MP_TEST_FLAG", default) is default
    monkeypatch.setenv("MP_TEST_FLAG", "")
    assert _strict_bool("MP_TEST_FLAG", default) is default


@pytest.mark.parametrize("raw", ["ture", "flase", "y", "ok", "2", "enabled"])
def test_anything_else_is_refused_naming_the_variable(monkeypatch, raw):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("MP_TEST_FLAG", raw)
    refusal = r"^MP_TEST_FLAG must be a boolean .*" + re.escape(repr(raw))
    with pytest.raises(ImproperlyConfigured, match=refusal):
        _strict_bool("MP_TEST_FLAG", True)


def test_every_boolean_setting_goes_through_the_strict_reader():
    assert "env.bool(" not in SETTINGS
    assert {"API_KEY_CACHE", "CONN_HEALTH_CHECKS", "PREPARED_STATEMENTS", "DEBUG"} <= set(BOOLEANS)


@pytest.mark.parametrize("name", BOOLEANS)
def test_a_typo_in_a_boolean_setting_stops_the_start(name):  # type: ignore[no-untyped-def]
    env = {**os.environ, "SECRET_KEY": "test", name: "ture"}
    result = subprocess.run(  # noqa: S603 (our own interpreter, fixed arguments)
        [sys.executable, "-c", "import config.settings"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode != 0
    assert f"ImproperlyConfigured: {name} must be a boolean" in result.stderr


@pytest.mark.parametrize(
    ("schedule", "starts"), [("*/15 2-4 * * 1-5", True), ("0 3 * *", False), ("61 3 * * *", False)]
)
def test_dream_schedule_is_a_crontab_of_five_fields(schedule, starts):  # type: ignore[no-untyped-def]
    env = {**os.environ, "SECRET_KEY": "test", "DREAM_SCHEDULE": schedule}
    result = subprocess.run(  # noqa: S603 (our own interpreter, fixed arguments)
        [sys.executable, "-c", "import config.settings"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (result.returncode == 0) is starts, result.stderr[-500:]
    if not starts:
        assert "ImproperlyConfigured: DREAM_SCHEDULE must be a crontab of 5 fields" in result.stderr
