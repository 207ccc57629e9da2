"""``make test``'s runner (devtools/testsuite.py): each vendor's pytest run ends with its slowest
tests, so CI's log shows where a run's time goes."""

import pytest

from devtools import testsuite

# Once per `make test`: it checks the runner's command line, not the database.
pytestmark = pytest.mark.sqlite


def pytest_arguments(monkeypatch, args: list[str]) -> list[str]:
    """The arguments a vendor's run hands pytest when ``make test`` is given ``args``."""
    started = []
    monkeypatch.setattr(
        testsuite.subprocess, "Popen", lambda command, **kwargs: started.append(command)
    )
    testsuite.VendorRun("SQLite").start(None, args)
    [command] = started
    return command[command.index("pytest") + 1 :]


def test_each_vendors_run_lists_its_30_slowest_tests(monkeypatch):
    assert pytest_arguments(monkeypatch, ["tests/coordination"]) == [
        "--durations=30",
        "tests/coordination",
    ]


def test_a_durations_the_caller_gives_comes_last_so_pytest_keeps_it(monkeypatch):
    assert pytest_arguments(monkeypatch, ["--durations=0", "-x"]) == [
        "--durations=30",
        "--durations=0",
        "-x",
    ]


@pytest.mark.parametrize(
    ("seconds", "text"), [(1347.06, "22 min 27 s"), (56.9, "57 s"), (60, "1 min 0 s")]
)
def test_the_summary_gives_each_runs_wall_time(seconds, text):
    assert testsuite.took_text(seconds) == text
