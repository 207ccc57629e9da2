"""``make test``'s runner (devtools/testsuite.py): the vendors' runs go on at once, the last
one in the terminal; each ends with its slowest tests, so CI's log shows where a run's time
goes."""

from types import SimpleNamespace

import pytest

from devtools import testsuite
from tests.support.polling import wait_until

# Once per `make test`: it checks the runner's command line, not the database.
pytestmark = pytest.mark.sqlite


def pytest_arguments(monkeypatch, args: list[str]) -> list[str]:
    """The arguments a vendor's run hands pytest when ``make test`` is given ``args``."""
    started = []
    monkeypatch.setattr(
        testsuite.subprocess,
        "Popen",
        lambda command, **kwargs: started.append(command) or SimpleNamespace(wait=lambda: 0),
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


@pytest.mark.parametrize(
    ("count", "background", "collected"),
    [
        (3, [True, True, False], [2, 0, 1]),
        (2, [True, False], [1, 0]),
        (1, [False], [0]),
        (0, [], []),
    ],
)
def test_every_run_but_the_last_goes_on_in_the_background_and_the_last_is_collected_first(
    count, background, collected
):
    assert testsuite.in_background(count) == background
    assert testsuite.collection_order(count) == collected


def test_a_background_runs_wall_time_ends_when_its_pytest_does(monkeypatch):
    """A run collected long after it ended reports its own time, not the time of collection."""
    ended = []
    monkeypatch.setattr(
        testsuite.subprocess,
        "Popen",
        lambda command, **kwargs: SimpleNamespace(wait=lambda: ended.append(1)),
    )
    run = testsuite.VendorRun("SQLite")
    run.start(None, [])
    wait_until(lambda: run.ended is not None, timeout=10, message="the run's end was not noted")
    took = run.took
    assert run.took == took  # it no longer grows once the run has ended
