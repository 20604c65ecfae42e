"""docs/architecture.md's module map matches the tree: every name it lists exists, and every module of the
project's packages is listed, itself or under a folder the map lists as a whole (``api/``, ``migrations``
aside, and apps.py). A module added without a line in the map, or one removed with its line left, fails
here."""

import re
from pathlib import Path

from django.conf import settings

ROOT = Path(settings.BASE_DIR)
DOC = ROOT / "docs" / "architecture.md"
# The trees the map covers; each is walked for modules (migrations, caches and __init__.py aside).
PACKAGES = ("config", "memoryplatform", "apikeys", "usermemory", "dream", "conversations", "extraction",
            "activity", "agenttools", "events")  # fmt: skip
SKIP_PARTS = {"migrations", "__pycache__", "static", "templates"}


def _map_block() -> list[str]:
    text = DOC.read_text()
    return re.search(r"```\n(.*?)```", text, re.DOTALL).group(1).splitlines()


def _listed() -> tuple[set[Path], set[Path]]:
    """The map's paths: (files, folders). A line is `<indent><names>  <what they are>`: names are the text
    before the first run of two spaces, separated by ", "; a folder ends with "/". The indent nests a name
    under the last folder listed at a smaller indent."""
    files: set[Path] = set()
    folders: set[Path] = set()
    stack: list[tuple[int, Path]] = []
    for line in _map_block():
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip(" "))
        head = re.split(r"\s{2,}", line.strip(), maxsplit=1)[0]
        if not re.fullmatch(r"[\w./, -]+", head) or (indent and not stack):
            continue  # a line continuing the description above
        while stack and stack[-1][0] >= indent:
            stack.pop()
        base = stack[-1][1] if stack else Path()
        last_folder = None
        for name in (part.strip() for part in head.split(",")):
            if not name or " " in name:
                break
            path = base / name.rstrip("/")
            if name.endswith("/"):
                if indent:  # an app's own folder (top level) covers only what is listed under it
                    folders.add(path)
                last_folder = path
            else:
                files.add(path)
        if last_folder is not None and len(head.split(",")) == 1:
            stack.append((indent, last_folder))
    return files, folders


def _modules() -> set[Path]:
    found = set()
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            relative = path.relative_to(ROOT)
            if SKIP_PARTS & set(relative.parts) or path.name in ("__init__.py", "apps.py"):
                continue
            found.add(relative)
    return found


def test_every_name_in_the_module_map_exists():
    files, folders = _listed()
    missing = sorted(str(p) for p in files | folders if not (ROOT / p).exists())
    assert len(files) > 50, "the map's block was not read"  # the parser, checked against the map's size
    assert not missing, f"docs/architecture.md lists what the tree does not have: {missing}"


def test_every_module_is_in_the_module_map():
    files, folders = _listed()
    unlisted = sorted(
        str(module)
        for module in _modules()
        if module not in files and not any(folder in module.parents for folder in folders)
    )
    assert not unlisted, f"modules missing from docs/architecture.md's map: {unlisted}"
