"""docs/architecture.md's module map matches the tree: every name it lists exists, and every module of the
project's packages is listed, itself or under a folder the map lists as a whole (``api/``, ``migrations``
aside, and apps.py). A module added without a line in the map, or one removed with its line left, fails
here. Each line is read whole, its description too: a module it names (``local.py``, ``config/urls.py``)
exists, and a folder listed as a whole names each of its modules (issue 56: the map named an
``embeddings/background.py`` that did not exist, and not the folder's modules that did)."""

import re
from dataclasses import dataclass
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


@dataclass
class Line:
    """One line of the map, with the lines continuing its description: the folder it is under, the folder it
    names (if it names one alone) and its description."""

    base: Path
    folder: Path | None
    text: str


# Folders listed as a whole whose modules follow the layout's pattern, named by the layout, not one by one.
BY_PATTERN = {"api", "templates", "static", "tests", "test"}
MENTION = re.compile(r"(?<![\w.:/])((?:[\w-]+/)*[\w-]+\.(?:py|ts|mjs))\b")


def _lines() -> list[Line]:
    """The map's lines as :class:`Line`: a line whose head is not names continues the one above."""
    lines: list[Line] = []
    stack: list[tuple[int, Path]] = []
    for line in _map_block():
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip(" "))
        head, text = (*re.split(r"\s{2,}", line.strip(), maxsplit=1), "")[:2]
        names = [part.strip() for part in head.split(",")]
        words = not re.fullmatch(r"[\w./, -]+", head) or any(" " in name or not name for name in names)
        if words or (indent and not stack):
            if lines:
                lines[-1].text += " " + line.strip()
            continue
        while stack and stack[-1][0] >= indent:
            stack.pop()
        base = stack[-1][1] if stack else Path()
        folder = base / names[0].rstrip("/") if len(names) == 1 and names[0].endswith("/") else None
        lines.append(Line(base, folder, text))
        if folder is not None:
            stack.append((indent, folder))
    return lines


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


def test_every_module_a_line_names_exists():
    """A module named in a line's description is in the tree: beside the line's name, under the folder the
    line names, from the project's root, or in an app (``each app's api/urls.py``)."""
    named = []
    for line in _lines():
        for mention in MENTION.findall(line.text):
            places = [line.base / mention, ROOT / mention]
            if line.folder is not None:
                places.append(line.folder / mention)
            in_an_app = "/" in mention and any(ROOT.glob(f"*/{mention}"))
            if not in_an_app and not any((ROOT / place).exists() for place in places):
                named.append(f"{line.folder or line.base}: {mention}")
    assert not named, f"docs/architecture.md names modules the tree does not have: {named}"


def test_a_folder_listed_as_a_whole_names_each_of_its_modules():
    """A folder inside an app (``embeddings/``, ``src/``) names in its line each module that has no line of
    its own."""
    files, _ = _listed()
    unnamed = []
    for line in _lines():
        if line.folder is None or line.base == Path() or line.folder.name in BY_PATTERN:
            continue
        for module in sorted((ROOT / line.folder).iterdir()):
            own_line = module.relative_to(ROOT) in files
            a_module = module.suffix in (".py", ".ts", ".mjs") and module.name != "__init__.py"
            named = re.search(rf"(?<![\w-]){re.escape(module.stem)}(?![\w-])", line.text)
            if a_module and not own_line and not named:
                unnamed.append(str(module.relative_to(ROOT)))
    assert not unnamed, f"docs/architecture.md's folder lines do not name these modules: {unnamed}"
