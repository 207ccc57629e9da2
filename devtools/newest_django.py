"""The engine's tests on the newest Django: the run's interpreter, its venv and its arguments.

Instatic runs on Django 5.2 LTS and on the newest Django (6.1, whose tasks interface is built
in). ``make test`` runs the whole suite on 5.2 LTS, once per vendor, and the engine's tests
(tests/coordination and tests/plugins: the coordination, the plugin SDK and the workers) once
more on Django 6.1 on SQLite. Django 6.1 needs Python 3.12, which is rarely the machine's
``python3``: ``make`` finds one (:func:`find_interpreter`, run as ``python3 -m
devtools.newest_django``) and makes the run's own venv, ``.venv-django61``, from
``requirements-django61.txt``. Without Python 3.12 there is no venv, and the runner skips the
run with a loud notice (a failure under ``CI=true``).

Only the standard library here: ``make`` runs this module with the machine's ``python3``
before any venv exists.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
#: The Python the run's venv is made with: Django 6.1 needs 3.12 or newer, and the run's
#: lock (requirements-django61.txt) is made for 3.12.
VERSION = "3.12"
VENV = BASE_DIR / ".venv-django61"
PYTHON = VENV / "bin" / "python"
#: Written by ``make`` once the venv has every locked requirement.
STAMP = VENV / ".installed"
#: The engine's tests: the coordination (workers included) and the plugins.
ENGINE_TESTS = ("tests/coordination", "tests/plugins")
#: Deselects the browser tests: Playwright is not in the run's venv, and the admin's pages are
#: tested on 5.2 LTS.
WITHOUT_BROWSER = "devtools.without_browser"
#: Runs ``python -c`` in a candidate: its version, once it has what ``python -m venv`` needs.
PROBE = "import ensurepip, sys, venv; print('%d.%d' % sys.version_info[:2])"


def candidates(path: str, pyenv_root: Path) -> list[str]:
    """Return the places a Python 3.12 may be, in the order they are tried: every
    ``python3.12`` on ``path`` (a pyenv shim comes first there, and fails unless pyenv has
    selected 3.12), then pyenv's own 3.12 versions, the newest first."""
    name = f"python{VERSION}"
    found = [str(Path(folder) / name) for folder in path.split(os.pathsep) if folder]
    found = [command for command in found if os.access(command, os.X_OK)]
    versions = []
    for folder in (pyenv_root / "versions").glob(f"{VERSION}.*"):
        number = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)", folder.name)
        if number and os.access(folder / "bin" / name, os.X_OK):
            versions.append((tuple(map(int, number.groups())), str(folder / "bin" / name)))
    return found + [command for _, command in sorted(versions, reverse=True)]


def runs_as_wanted(command: str) -> bool:
    """Return whether ``command`` starts, is Python 3.12, and can make a venv with pip."""
    try:
        probe = subprocess.run(
            [command, "-c", PROBE], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0 and probe.stdout.strip() == VERSION


def pyenv_root() -> Path:
    """Return where pyenv keeps its Pythons (``PYENV_ROOT``, else ``~/.pyenv``)."""
    return Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")


def find_interpreter() -> str | None:
    """Return the first candidate that runs as Python 3.12, or ``None``."""
    paths = candidates(os.environ.get("PATH", ""), pyenv_root())
    return next((command for command in paths if runs_as_wanted(command)), None)


def missing() -> str:
    """Return the notice of a runner that has no venv for the run: why, and what to do."""
    if find_interpreter() is None:
        why = f"no Python {VERSION}: not on PATH, nor in pyenv's {pyenv_root() / 'versions'}"
        fix = f"Install Python {VERSION} (e.g. `pyenv install {VERSION}`), then `make test` again"
    else:
        why = f"{VENV.name} is not set up"
        fix = "`make test` sets it up"
    return (
        f"SKIPPED: the engine's tests on Django 6.1 ({why}).\n"
        f"{fix}; with CI=true this run is a failure."
    )


def installed() -> bool:
    """Return whether the run's venv is there, with everything locked installed."""
    return STAMP.exists() and PYTHON.exists()


def names_tests(argument: str) -> bool:
    """Return whether a pytest argument names tests: a file or folder under tests/, maybe
    with ``::`` and a test's name."""
    if argument.startswith("-"):
        return False
    path = (BASE_DIR / argument.split("::")[0]).resolve()
    tests = BASE_DIR / "tests"
    return path.exists() and (path == tests or tests in path.parents)


def pytest_arguments(argv: list[str]) -> list[str]:
    """Return the run's pytest arguments for ``make test``'s ``argv``: without its browser tests,
    and the engine's tests unless ``argv`` names tests of its own (then those)."""
    tests = [] if any(names_tests(argument) for argument in argv) else list(ENGINE_TESTS)
    return ["-p", WITHOUT_BROWSER, *tests, *argv]


def main() -> int:
    """Print the path of a Python 3.12 for the run's venv; without one, say so and exit 1."""
    found = find_interpreter()
    if found is None:
        print(
            f"NOTICE: no Python {VERSION} found (python{VERSION} on PATH, or pyenv's under "
            f"{pyenv_root() / 'versions'}): the engine's tests on Django 6.1 will be skipped "
            "(a failure under CI=true).",
            file=sys.stderr,
        )
        return 1
    print(found)
    return 0


if __name__ == "__main__":
    sys.exit(main())
