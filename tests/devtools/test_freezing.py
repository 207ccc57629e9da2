"""Freezing a process: once ``freeze`` returns, no thread of it runs (a SIGSTOP sent is not a
process stopped: a busy thread goes on until it next passes through the kernel)."""

import os
import signal
import subprocess
import sys

import pytest

from devtools.freezing import all_still, freeze, thread_states
from tests.support.polling import wait_until

pytestmark = pytest.mark.sqlite  # the same on every vendor: it freezes a process, not a database

BUSY_THREADS = """
import sys, threading, time
def spin():
    while True:
        pass
for _ in range(3):
    threading.Thread(target=spin, daemon=True).start()
print("spinning", flush=True)
time.sleep(600)
"""


@pytest.mark.parametrize(
    ("states", "still"),
    [
        (["T", "T", "T"], True),
        (["t"], True),
        (["T", "Z"], True),  # a thread that has exited runs nothing either
        ([], True),  # the process has ended
        (["T", "R"], False),
        (["S", "T"], False),  # asleep: it can wake and run
        (["D"], False),
    ],
)
def test_threads_that_run_no_more_code(states, still):
    assert all_still(states) is still


def test_every_thread_is_stopped_when_freeze_returns():
    process = subprocess.Popen(
        [sys.executable, "-c", BUSY_THREADS], stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout.readline() == "spinning\n"
        for _ in range(50):
            freeze(process.pid)
            states = thread_states(process.pid)
            assert len(states) == 4 and all_still(states), states
            os.kill(process.pid, signal.SIGCONT)
            wait_until(
                lambda: not all_still(thread_states(process.pid)),
                timeout=30,
                message="the process did not go on after SIGCONT",
            )
    finally:
        process.kill()
        process.wait()


def test_a_process_that_is_gone_cannot_be_frozen():
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    with pytest.raises(ProcessLookupError):
        freeze(process.pid)
