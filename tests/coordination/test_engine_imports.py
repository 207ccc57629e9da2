"""The engine does not pull in Django's HTTP layer: it imports the metrics for counters only.

``django.setup()`` itself imports ``django.http`` (through ``django.urls``), so a look at
``sys.modules`` cannot tell; instead every ``coordination`` module the engine's modules import,
at the top or inside a function, is read (its source, not run) and none may import
``django.http`` or a module that serves HTTP (views, the metrics server).
"""

import ast
import importlib.util
from pathlib import Path

import pytest

ENGINE = [
    "coordination.loop",
    "coordination.runner",
    "coordination.ledger",
    "coordination.scheduler",
]
HTTP = ("django.http", "django.views", "django.shortcuts", "django.template.response")
#: ``runscheduler --metrics-port`` starts the server; the engine only feeds its counters.
SERVING = ("coordination.views", "coordination.metrics_server", "coordination.access")


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def imported_by(module: str) -> set[str]:
    """Return the modules ``module``'s source imports (``from a import b``: ``a.b`` if a module)."""
    path = Path(importlib.util.find_spec(module).origin)
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            for alias in node.names:
                if node.module.startswith("coordination") and _is_module(
                    f"{node.module}.{alias.name}"
                ):
                    names.add(f"{node.module}.{alias.name}")
    return names


def import_chains(roots: list[str]) -> dict[str, list[str]]:
    """Return every module the ``coordination`` modules reachable from ``roots`` import, each
    with the chain of ``coordination`` modules that leads to it."""
    chains = {root: [root] for root in roots}
    todo = list(roots)
    while todo:
        module = todo.pop()
        for name in imported_by(module):
            if name in chains:
                continue
            chains[name] = [*chains[module], name]
            if name.startswith("coordination"):
                todo.append(name)
    return chains


def http_imports(chains: dict[str, list[str]]) -> list[str]:
    return sorted(
        " -> ".join(chain)
        for name, chain in chains.items()
        if name.startswith(HTTP) or name in SERVING
    )


def test_the_import_reader_sees_the_http_layer_where_it_is():
    assert http_imports(import_chains(["coordination.views"]))
    assert http_imports(import_chains(["coordination.metrics_server"]))


@pytest.mark.parametrize("module", ENGINE)
def test_the_engine_does_not_import_the_http_layer(module):
    found = http_imports(import_chains([module]))
    assert not found, "the engine imports HTTP code:\n" + "\n".join(found)


def test_the_engine_reaches_the_metrics_counters():
    assert "coordination.metrics" in import_chains(ENGINE)


#: What the planner must not reach: the database's writers and readers, the clock, settings.
IMPURE = (
    "coordination.ledger",
    "coordination.selectors",
    "coordination.services",
    "coordination.clock",
    "coordination.conf",
    "coordination.liveness",
)


def test_the_planner_imports_no_writer_reader_clock_or_settings():
    """The planner is pure by construction, not only by discipline: no module it imports
    (directly, or through ``coordination`` modules) is one that reads or writes the database,
    the clock or the settings."""
    chains = import_chains(["coordination.planner"])
    found = sorted(
        " -> ".join(chain)
        for name, chain in chains.items()
        if any(name == impure or name.startswith(f"{impure}.") for impure in IMPURE)
    )
    assert not found, "the planner reaches:\n" + "\n".join(found)
