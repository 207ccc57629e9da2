"""``make test``'s run of the engine's tests on Django 6.1 (devtools/newest_django.py): when it
starts beside the vendors' runs, what it hands pytest, where its Python 3.12 is found, which
tests it leaves out, and that its lock keeps the site's pins."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from devtools import newest_django, testsuite
from tests.support.processes import BASE_DIR

ENGINE = ["tests/coordination", "tests/plugins"]
WITHOUT_BROWSER = ["-p", "devtools.without_browser"]


@pytest.mark.parametrize(
    ("names", "at_once", "started", "waiting"),
    [
        # All four: the vendors' three at once (PostgreSQL last, in the foreground), the
        # Django 6.1 run when one of them ends.
        (
            ["sqlite", "mysql", "postgresql", "django61"],
            3,
            ["sqlite", "mysql", "postgresql"],
            ["django61"],
        ),
        # The order they are named in makes no difference.
        (
            ["django61", "postgresql", "sqlite", "mysql"],
            3,
            ["sqlite", "mysql", "postgresql"],
            ["django61"],
        ),
        # No MariaDB here: room for it at once, started first so PostgreSQL keeps the terminal.
        (["sqlite", "postgresql", "django61"], 3, ["django61", "sqlite", "postgresql"], []),
        (["sqlite", "django61"], 3, ["django61", "sqlite"], []),
        (["django61"], 3, ["django61"], []),  # alone: in the foreground
        (["sqlite", "mysql", "postgresql"], 3, ["sqlite", "mysql", "postgresql"], []),
        (["sqlite", "django61"], 1, ["sqlite"], ["django61"]),
        ([], 3, [], []),
    ],
)
def test_at_most_three_runs_go_on_at_once_and_the_django_61_run_waits(
    names, at_once, started, waiting
):
    assert testsuite.start_plan(names, at_once=at_once) == (started, waiting)


def test_the_django_61_run_is_a_run_of_its_own_venv_in_the_summary():
    kind = testsuite.kind_of("django61")
    assert (kind.label, kind.python, kind.make_server) == (
        "Django 6.1",
        str(BASE_DIR / ".venv-django61" / "bin" / "python"),
        None,  # SQLite
    )
    assert kind.arguments([]) == [*WITHOUT_BROWSER, *ENGINE]
    assert kind.label in testsuite.SUMMARY_ORDER
    assert "django61" in testsuite.RUNS


@pytest.mark.parametrize(
    ("name", "log_name"), [("sqlite", "sqlite"), ("mysql", "mariadb"), ("django61", "django61")]
)
def test_a_background_runs_log_is_named_after_the_run(name, log_name):
    assert testsuite.kind_of(name).log_name == log_name


@pytest.mark.parametrize(
    ("argv", "arguments"),
    [
        ([], [*WITHOUT_BROWSER, *ENGINE]),
        (["-x", "--durations=0"], [*WITHOUT_BROWSER, *ENGINE, "-x", "--durations=0"]),
        # A -k expression that happens to be an app's folder names no tests.
        (["-k", "publishing"], [*WITHOUT_BROWSER, *ENGINE, "-k", "publishing"]),
        # Tests the caller names are the run's tests.
        (
            ["-q", "tests/coordination/test_planner.py"],
            [*WITHOUT_BROWSER, "-q", "tests/coordination/test_planner.py"],
        ),
        (
            ["tests/plugins/test_sdk.py::test_anything"],
            [*WITHOUT_BROWSER, "tests/plugins/test_sdk.py::test_anything"],
        ),
        (["tests"], [*WITHOUT_BROWSER, "tests"]),
        # A path that does not exist names no tests (pytest says so on the other runs).
        (["tests/nowhere"], [*WITHOUT_BROWSER, *ENGINE, "tests/nowhere"]),
    ],
)
def test_the_run_takes_the_engines_tests_unless_the_caller_names_tests(argv, arguments):
    assert newest_django.pytest_arguments(argv) == arguments


def executable(path: Path, script: str = "#!/bin/sh\nexit 127\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(script)
    path.chmod(0o755)
    return path


def test_candidates_are_python312_on_the_path_then_pyenvs_312_versions_newest_first(tmp_path):
    shims = executable(tmp_path / "shims" / "python3.12")
    (tmp_path / "readonly").mkdir()
    (tmp_path / "readonly" / "python3.12").write_text("")  # not executable
    versions = tmp_path / "pyenv" / "versions"
    for version in ("3.12.1", "3.12.10", "3.12-dev", "3.11.7", "3.13.0"):
        executable(versions / version / "bin" / f"python{version[:4]}")
    (versions / "3.12.3" / "bin").mkdir(parents=True)  # a version without its interpreter
    path = os.pathsep.join(str(tmp_path / folder) for folder in ("shims", "none", "readonly"))
    assert newest_django.candidates(path, tmp_path / "pyenv") == [
        str(shims),
        str(versions / "3.12.10" / "bin" / "python3.12"),
        str(versions / "3.12.1" / "bin" / "python3.12"),
    ]


#: (what the PATH's ``python3.12`` does, what pyenv's 3.12.1 does, which is found). A pyenv
#: shim that pyenv has not pointed at 3.12 exits 127; a Python without ensurepip (Debian's
#: without python3.12-venv) cannot make the venv.
FOUND = [
    ("exit 127", "echo 3.12", "pyenv"),
    ("echo 3.12", "echo 3.12", "path"),
    ("echo 3.11", "exit 1", None),
    ("exit 127", "echo 'No module named ensurepip' >&2; exit 1", None),
]


@pytest.mark.parametrize(("on_path", "in_pyenv", "found"), FOUND)
def test_the_interpreter_is_the_first_candidate_that_runs_as_python_312(
    on_path, in_pyenv, found, tmp_path, monkeypatch
):
    shim = executable(tmp_path / "bin" / "python3.12", f"#!/bin/sh\n{on_path}\n")
    pyenv = executable(
        tmp_path / "pyenv" / "versions" / "3.12.1" / "bin" / "python3.12",
        f"#!/bin/sh\n{in_pyenv}\n",
    )
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "pyenv"))
    expected = {"path": str(shim), "pyenv": str(pyenv), None: None}[found]
    assert newest_django.find_interpreter() == expected
    if found is None:
        assert "no Python 3.12" in newest_django.missing()


def test_the_real_interpreter_found_here_is_python_312():
    """The check runs the candidate: whatever it finds on this machine is a 3.12 with venv."""
    found = newest_django.find_interpreter()
    if found is None:
        pytest.skip("no Python 3.12 on this machine")
    version = subprocess.run(
        [found, "-c", "import sys; print(sys.version_info[:2])"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert version.stdout.strip() == "(3, 12)"


def test_the_browser_tests_are_deselected_and_counted_so(tmp_path):
    (tmp_path / "conftest.py").write_text(
        "import pytest\n\n@pytest.fixture\ndef browser():\n    raise AssertionError('used')\n"
    )
    (tmp_path / "test_pages.py").write_text(
        "def test_in_a_browser(browser):\n    pass\n\ndef test_without(tmp_path):\n    pass\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    env["PYTHONPATH"] = str(BASE_DIR)
    outcome = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:django", "-p", "no:cacheprovider"]
        + ["-p", newest_django.WITHOUT_BROWSER, "-q", str(tmp_path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert outcome.returncode == 0, outcome.stdout + outcome.stderr
    assert "1 passed, 1 deselected" in outcome.stdout


def pins(path: Path) -> dict[str, str]:
    """Return ``{normalised name: version}`` of the ``name==version`` lines of ``path``."""
    found = {}
    for line in path.read_text().splitlines():
        pinned = re.match(r"([A-Za-z0-9_.-]+)(\[[^]]*\])?==([^\s;\\]+)", line)
        if pinned:
            found[re.sub(r"[-_.]+", "-", pinned.group(1)).lower()] = pinned.group(3)
    return found


def test_the_django_61_lock_keeps_every_pin_of_the_site_but_djangos():
    """A requirements.in edit without `make lock` shows here, not in the 6.1 run's venv."""
    site = pins(BASE_DIR / "requirements.in")
    locked = pins(BASE_DIR / "requirements-django61.txt")
    overridden = pins(BASE_DIR / "requirements-django61.overrides")
    assert overridden["django"].startswith("6.1.")
    assert locked["django"] == overridden["django"]
    assert {name: locked.get(name) for name in site if name not in overridden} == {
        name: version for name, version in site.items() if name not in overridden
    }
