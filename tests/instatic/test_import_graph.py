"""No import circles among the project's modules, lazy imports included.

Every module of the project's apps (each installed app that lives in this repository, the
tests' own apart), of the project package ``instatic`` and of ``devtools`` is read, not run:
its source is parsed with ``ast`` and every ``import`` in it, at module level or inside a
function, is an edge of the graph.
``from a import b`` is an edge to ``a.b`` when that is a module of the project, else to ``a``.
A circle is any strongly connected set of two or more modules (or a module importing itself):
a lazy import that only breaks a circle at import time still ties the two rooms together.
"""

import ast
from pathlib import Path

import pytest
from django.apps import apps

# Once per `make test`: it reads source files, the same whatever the run's vendor.
pytestmark = pytest.mark.sqlite

ROOT = Path(__file__).resolve().parents[2]

#: Circles allowed while they are being removed, each the set of its modules. Empty: a
#: circle anywhere in the apps, the developer tools or the project is a failure.
ALLOWED_CIRCLES_BEING_REMOVED: frozenset[frozenset[str]] = frozenset()


#: Read with the apps: the project package and the developer tools (the test runner, the
#: throwaway servers, the chaos soak).
ALSO_READ = ("instatic", "devtools")


def project_packages() -> list[str]:
    """Return the top-level packages of the project's installed apps, and ``ALSO_READ``."""
    names = set(ALSO_READ)
    for config in apps.get_app_configs():
        path = Path(config.path).resolve()
        if path.is_relative_to(ROOT) and not path.is_relative_to(ROOT / "tests"):
            names.add(config.name.partition(".")[0])
    return sorted(names)


def module_files(root: Path, packages: list[str]) -> dict[str, Path]:
    """Return every module of ``packages`` by dotted name (a package by its own name)."""
    modules = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if any(part.startswith(".") or part == "__pycache__" for part in parts):
                continue
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join(parts)] = path
    return modules


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Return the project's modules that module ``name`` (at ``path``) imports, anywhere in it."""
    is_package = path.name == "__init__.py"
    found = set()

    def add(target: str) -> None:
        # The most specific module of the project the dotted name names.
        while target and target not in modules:
            target = target.rpartition(".")[0]
        if target:
            found.add(target)

    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = name if is_package else name.rpartition(".")[0]
                for _ in range(node.level - 1):
                    package = package.rpartition(".")[0]
                base = f"{package}.{base}" if base else package
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                add(candidate if candidate in modules else base)
    return found


def import_graph(root: Path = ROOT, packages: list[str] | None = None) -> dict[str, set[str]]:
    """Return each module of ``packages`` (the project's) with the ones of them it imports."""
    modules = module_files(root, project_packages() if packages is None else packages)
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def circles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """Return the strongly connected sets of two or more modules (Tarjan, iteratively), and
    every module that imports itself."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for target in edges:
                if target not in graph:
                    continue
                if target not in index:
                    index[target] = low[target] = counter
                    counter += 1
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    members = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        members.add(member)
                        if member == node:
                            break
                    if len(members) > 1 or node in graph[node]:
                        found.append(frozenset(members))
    return found


def describe(circle: frozenset[str], graph: dict[str, set[str]]) -> str:
    """Return ``circle`` as its modules, each with what it imports inside the circle."""
    return "; ".join(
        f"{name} -> {', '.join(sorted(graph[name] & circle))}" for name in sorted(circle)
    )


def test_the_finder_sees_a_lazy_circle(tmp_path):
    """A circle closed only by an import inside a function, or by a relative one, is found."""
    package = tmp_path / "app"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "one.py").write_text("from app import two\n")
    (package / "two.py").write_text("def later():\n    from .one import thing\n")
    (package / "three.py").write_text("import app.one\n")
    graph = import_graph(tmp_path, ["app"])
    assert graph["app.two"] == {"app.one"}
    assert circles(graph) == [frozenset({"app.one", "app.two"})]


def test_no_import_circles_in_the_apps():
    graph = import_graph()
    for module in ("coordination.loop", "plugins.sdk", "publishing.models", "devtools.testsuite"):
        assert module in graph  # it read the project
    unexpected = [c for c in circles(graph) if c not in ALLOWED_CIRCLES_BEING_REMOVED]
    assert not unexpected, "import circles:\n" + "\n".join(describe(c, graph) for c in unexpected)


def test_the_allowance_lists_only_circles_that_still_exist():
    """An allowance whose circle is gone is removed, so it cannot cover a new one."""
    found = set(circles(import_graph()))
    assert not ALLOWED_CIRCLES_BEING_REMOVED - found, "remove the circles that are gone"


#: Which apps each app may import (besides itself and Django): dependencies point one way,
#: ``publishing <- reviews <- releases``, ``publishing <- outbox``, everything
#: ``-> coordination`` (and ``-> editors``, the editors' zones and notification switches, which
#: import no app).
MAY_IMPORT = {
    "coordination": set(),
    "editors": set(),
    "publishing": {"coordination", "editors"},
    "reviews": {"coordination", "editors", "publishing"},
    "releases": {"coordination", "editors", "publishing", "reviews"},
    "outbox": {"coordination", "editors", "publishing"},
}


def app_imports(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """Return each top-level package with the other top-level packages its modules import."""
    found: dict[str, set[str]] = {}
    for name, targets in graph.items():
        app = name.partition(".")[0]
        found.setdefault(app, set()).update(t.partition(".")[0] for t in targets)
        found[app].discard(app)
    return found


def test_the_finder_sees_an_app_importing_another(tmp_path):
    for app, body in (("core", "def later():\n    from extra import thing\n"), ("extra", "")):
        (tmp_path / app).mkdir()
        (tmp_path / app / "__init__.py").write_text("")
        (tmp_path / app / "module.py").write_text(body)
    assert app_imports(import_graph(tmp_path, ["core", "extra"]))["core"] == {"extra"}


def test_dependencies_between_the_apps_point_one_way():
    """Publishing knows nothing of reviews, releases or the outbox (they attach through its
    extension points), and the engine knows none of the apps; lazy imports count."""
    found = app_imports(import_graph())
    for app, allowed in MAY_IMPORT.items():
        assert found[app] <= allowed, f"{app} imports {sorted(found[app] - allowed)}"
