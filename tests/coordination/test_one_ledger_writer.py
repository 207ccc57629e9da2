"""Every write of a run row or a job state goes through the ``coordination/ledger`` package.

Read statically from the apps' sources: a call of a writing queryset or manager method
(``update``, ``create``, ``delete``, ``bulk_create``, ...) on ``JobRun``/``JobState`` (or their
plugin proxies) anywhere else, directly or through a name bound to such a queryset, fails
this test with the file and line, so the ledger stays the one place that says what is
recorded and how.
"""

import ast
from pathlib import Path

import pytest

# Once per `make test`: it reads the sources, the same whatever the run's vendor.
pytestmark = pytest.mark.sqlite

ROOT = Path(__file__).resolve().parents[2]
APPS = ["coordination", "plugins", "publishing", "instatic"]
LEDGER = Path("coordination/ledger")
#: The plugin SDK's pytest helper sets a job's state as a test asks (``make_due``): test
#: set-up, not something the engine records.
NOT_ENGINE = {Path("plugins/testing.py")}
MODELS = {"JobRun", "JobState", "PluginJob", "PluginRun", "GroupJob"}
WRITES = {
    "update",
    "create",
    "delete",
    "bulk_create",
    "bulk_update",
    "update_or_create",
    "get_or_create",
    "save",
}


def _mentions_model_manager(node: ast.AST) -> bool:
    """True if ``node`` contains ``<Model>.objects`` for one of the ledger's models."""
    return any(
        isinstance(sub, ast.Attribute)
        and sub.attr in ("objects", "_default_manager")
        and isinstance(sub.value, ast.Name)
        and sub.value.id in MODELS
        for sub in ast.walk(node)
    )


def _root_name(node: ast.AST) -> str | None:
    """The name a chain of calls and attributes starts from (``qs`` in ``qs.filter().x``)."""
    while isinstance(node, ast.Attribute | ast.Call | ast.Subscript):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def ledger_writes(tree: ast.AST) -> list[int]:
    """Return the lines of writes to the ledger's models in ``tree``."""
    lines = []
    scopes = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.Module)]
    for scope in scopes:
        bound = {
            target.id
            for node in ast.walk(scope)
            if isinstance(node, ast.Assign) and _mentions_model_manager(node.value)
            for target in node.targets
            if isinstance(target, ast.Name)
        }
        for node in ast.walk(scope):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in WRITES
            ):
                continue
            receiver = node.func.value
            if _mentions_model_manager(receiver) or _root_name(receiver) in bound:
                lines.append(node.lineno)
    return sorted(set(lines))


def engine_sources() -> list[Path]:
    return sorted(
        path.relative_to(ROOT)
        for app in APPS
        for path in (ROOT / app).rglob("*.py")
        if "migrations" not in path.parts
    )


def test_the_finder_sees_direct_and_bound_writes():
    source = (
        "def f():\n"
        "    JobRun.objects.filter(pk=1).update(status='x')\n"
        "    rows = JobState.objects.filter(name='a')\n"
        "    rows.update(paused=True)\n"
        "    JobState.objects.filter(name='a').exists()\n"
        "    Node.objects.filter(name='a').update(x=1)\n"
    )
    assert ledger_writes(ast.parse(source)) == [2, 4]


def test_no_module_but_the_ledger_writes_runs_or_job_states():
    writers = {
        str(path): lines
        for path in engine_sources()
        if LEDGER not in path.parents and path not in NOT_ENGINE
        if (lines := ledger_writes(ast.parse((ROOT / path).read_text())))
    }
    assert not writers, (
        f"JobRun/JobState rows written outside the ledger (file: lines): {writers}; "
        "add a function saying what it records to coordination/ledger/ and call it"
    )


def test_the_ledger_itself_is_seen_writing():
    for module in ("states", "claims", "outcomes", "missed", "abandonment"):
        assert ledger_writes(ast.parse((ROOT / LEDGER / f"{module}.py").read_text())), module
