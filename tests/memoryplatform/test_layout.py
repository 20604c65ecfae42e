"""The apps' import graph, read from the source with ``ast``: no app-level cycle, and no domain app importing
the agent-protocol doors (``agenttools``). Every import counts, at any depth (a function's lazy import, a
``TYPE_CHECKING`` block): a layer is what a module may name, not only what it loads at start.

``memoryplatform`` is the project: a shared kernel every app may import (errors, routing, locks, the LLM, the
embedder), and the wiring Django loads by dotted path (settings, the URL map, the ASGI and WSGI apps, the
middleware, the system checks), which may import any app. The kernel itself imports no app."""

import ast
from collections.abc import Iterator
from pathlib import Path

from django.apps import apps
from django.conf import settings

ROOT = Path(settings.BASE_DIR)
DOORS = "agenttools"
PROJECT = "memoryplatform"
# The composition root: it may import every app. ``overview`` is the staff overview page, which reads each
# app's selectors, mounted by urls.py.
WIRING = {
    f"{PROJECT}.{name}" for name in ("settings", "urls", "asgi", "wsgi", "middleware", "checks", "overview")
}


def local_apps() -> list[str]:
    """The INSTALLED_APPS that are this repository's packages."""
    return sorted(
        config.name
        for config in apps.get_app_configs()
        if "." not in config.name and Path(config.path).resolve().parent == ROOT
    )


def modules(app: str) -> Iterator[tuple[str, Path]]:
    for path in sorted((ROOT / app).rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        yield ".".join(parts[:-1] if parts[-1] == "__init__" else parts), path


def imported(module: str, path: Path) -> Iterator[tuple[str, int]]:
    """Each absolute module name ``path`` imports, with its line (relative imports resolved)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1])
                yield f"{base}.{node.module}" if node.module else base, node.lineno
            else:
                yield node.module or "", node.lineno


def app_edges() -> dict[tuple[str, str], list[str]]:
    """(importing app, imported app) -> where, for every import of one local app by another."""
    names = set(local_apps())
    edges: dict[tuple[str, str], list[str]] = {}
    for app in names:
        for module, path in modules(app):
            if module in WIRING:
                continue
            for name, line in imported(module, path):
                target = name.partition(".")[0]
                if target in names and target != app:
                    edges.setdefault((app, target), []).append(f"{path.relative_to(ROOT)}:{line} {name}")
    return edges


def cycles(edges: dict[tuple[str, str], list[str]]) -> list[list[str]]:
    """The strongly connected components of more than one app (Tarjan's algorithm)."""
    graph: dict[str, set[str]] = {}
    for source, target in edges:
        graph.setdefault(source, set()).add(target)
        graph.setdefault(target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for successor in sorted(graph[node]):
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_every_app_is_found():
    domain = {"apikeys", "usermemory", "dream", "conversations", "activity"}
    assert {PROJECT, DOORS} | domain <= set(local_apps())


def test_no_app_level_import_cycle():
    edges = app_edges()
    found = cycles(edges)
    where = [
        f"{source} -> {target}: {edges[source, target][0]}"
        for component in found
        for source in component
        for target in component
        if (source, target) in edges
    ]
    assert found == [], "\n".join(where)


def test_no_domain_app_imports_the_agent_tools():
    edges = app_edges()
    importers = {source: where for (source, target), where in edges.items() if target == DOORS}
    assert importers == {}


def test_the_project_kernel_imports_no_app():
    edges = app_edges()
    kernel = {target: where for (source, target), where in edges.items() if source == PROJECT}
    assert kernel == {}


def test_the_wiring_mounts_the_agent_tools():
    """The composition root mounts the doors: the URL map (``/v1/tools``) and the ASGI app (``/mcp``)."""
    urls = (ROOT / "config" / "urls.py").read_text()
    asgi = {name for name, _ in imported("config.asgi", ROOT / "config" / "asgi.py")}
    assert f'include("{DOORS}.api.urls")' in urls
    assert f"{DOORS}.mcp_server" in asgi


def test_the_domain_imports_no_door_of_the_project():
    """Services, selectors and the SQL layer raise the domain's errors (``memoryplatform.errors``) and never
    import the REST layer (``memoryplatform.api``, an app's ``api``): the doors translate, not the domain."""
    found = []
    for app in local_apps():
        if app in (DOORS, PROJECT):
            continue
        for module, path in modules(app):
            door = (".api", ".management", ".migrations")
            if any(part in module for part in door) or module.endswith("admin"):
                continue
            for name, line in imported(module, path):
                if name == f"{PROJECT}.api" or name.startswith(f"{PROJECT}.api.") or ".api." in f"{name}.":
                    found.append(f"{path.relative_to(ROOT)}:{line} {name}")
    assert found == []
