"""The layers are import-linter's contracts in pyproject.toml, which ``make lint`` (and so CI) checks with
``lint-imports``: ``config/`` (the composition root) on top, the apps in the order they import each other,
the shared kernel (``memoryplatform/``) at the bottom importing no app, and only doors importing the REST
layer. Every import counts, at any depth (a function's lazy import, a ``TYPE_CHECKING`` block).

What import-linter cannot say is that its contracts name every package of the project: an app added to
INSTALLED_APPS but to no contract would be held to nothing. These tests say it."""

import tomllib
from pathlib import Path
from typing import Any

from django.apps import apps
from django.conf import settings

ROOT = Path(settings.BASE_DIR)
COMPOSITION_ROOT = "config"


def local_apps() -> list[str]:
    """The INSTALLED_APPS that are this repository's packages."""
    return sorted(
        config.name
        for config in apps.get_app_configs()
        if "." not in config.name and Path(config.path).resolve().parent == ROOT
    )


def import_linter() -> dict[str, Any]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]


def test_every_app_is_found():
    domain = {"apikeys", "usermemory", "dream", "conversations", "activity", "extraction"}
    assert {"memoryplatform", "agenttools"} | domain <= set(local_apps())


def test_import_linter_reads_every_package():
    assert sorted(import_linter()["root_packages"]) == sorted([*local_apps(), COMPOSITION_ROOT])


def test_every_package_is_a_layer_the_composition_root_on_top_the_kernel_at_the_bottom():
    contracts = import_linter()["contracts"]
    (layers,) = [contract["layers"] for contract in contracts if contract["type"] == "layers"]
    named = [name.strip() for layer in layers for name in layer.split("|")]
    assert sorted(named) == sorted([*local_apps(), COMPOSITION_ROOT])
    assert (layers[0], layers[-1]) == (COMPOSITION_ROOT, "memoryplatform")
