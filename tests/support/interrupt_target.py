"""A test that starts a scheduler and waits to be interrupted (test_interrupted_run.py runs it).

Not collected with the suite (its name does not start with ``test_``); pytest runs it when
given its path.
"""

import threading

import pytest


@pytest.mark.django_db(transaction=True)
def test_waits_with_a_scheduler_running(schedulers):
    proc = schedulers("interrupt-target", "publishing")
    proc.wait_for_log("running groups", timeout=60)
    print("\nstage scheduler", proc.pid, flush=True)
    threading.Event().wait(600)
