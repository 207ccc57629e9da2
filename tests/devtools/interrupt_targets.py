"""Tests that leave a test process in one state and wait to be interrupted.

``test_runner_interrupts.py`` runs each of them through ``devtools.testsuite``, as ``make test``
does, and interrupts the runner as a terminal's Ctrl-C does once the line ``stage <name>
<pids>`` is printed. Not collected with the suite (the file's name does not start with
``test_``); pytest runs it when given its path.
"""

import threading

import pytest

#: Far longer than any test waits: the interrupt ends the wait.
FOREVER = 600


def stage(name: str, *procs) -> None:
    print(f"\nstage {name}", *(proc.pid for proc in procs), flush=True)


@pytest.mark.django_db(transaction=True)
def test_starting(schedulers):
    """A scheduler that has just been started: Python and Django are still loading."""
    proc = schedulers("interrupt-starting", "publishing")
    stage("starting", proc)
    threading.Event().wait(FOREVER)


@pytest.mark.django_db(transaction=True)
def test_waiting(schedulers):
    """A scheduler waiting for a database that does not answer (a closed loopback port)."""
    absent = {"DATABASE_URL": "postgres://nobody@127.0.0.1:9/absent"}
    proc = schedulers("interrupt-waiting", env={**absent, "INSTATIC_STARTUP_DB_WAIT": "600"})
    proc.wait_for_log("Trying again in", timeout=60)
    stage("waiting", proc)
    threading.Event().wait(FOREVER)


@pytest.mark.django_db(transaction=True)
def test_refusing(schedulers):
    """A scheduler whose node name is in use, waiting for the name to go stale before it
    refuses (a lease long enough for the interrupt to come first)."""
    lease = {"INSTATIC_LEASE": "120"}
    first = schedulers("interrupt-same-name", "publishing", env=lease)
    first.wait_for_log("running groups", timeout=60)
    second = schedulers("interrupt-same-name", "publishing", env=lease)
    second.wait_for_log("Waiting for it to go stale", timeout=60)
    stage("refusing", first, second)
    threading.Event().wait(FOREVER)
