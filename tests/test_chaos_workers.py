"""The chaos soak's worker pieces: fault windows a queued run waited behind, a process's
children."""

import os
import signal
import subprocess
import sys

import pytest

from devtools.chaos.evidence import merge_spans, waited_behind
from devtools.chaos.soak import child_pids
from tests.support.polling import wait_until


@pytest.mark.parametrize(
    ("spans", "merged"),
    [
        ([], []),
        ([(5, 6), (1, 2)], [(1, 2), (5, 6)]),
        ([(1, 4), (2, 3)], [(1, 4)]),
        ([(3, 5), (1, 3)], [(1, 5)]),
        ([(1, 2), (2.5, 4), (3, 6)], [(1, 2), (2.5, 6)]),
    ],
)
def test_fault_windows_merge_when_they_overlap(spans, merged):
    assert merge_spans(spans) == merged


@pytest.mark.parametrize(
    ("queued", "started", "behind"),
    [
        (0, 1, False),  # before every window
        (0, 10, True),  # waited through the first window
        (9, 10.5, True),  # queued before it ended, started after it began
        (11, 12, False),  # between the windows
        (11, 20, True),  # started in the second window
        (31, 32, False),  # after every window
    ],
)
def test_a_run_waited_behind_a_fault_when_its_wait_overlaps_a_window(queued, started, behind):
    assert waited_behind([(5, 10), (15, 30)], queued, started) is behind


def test_child_pids_are_the_children_of_that_process():
    parent = subprocess.Popen(
        [sys.executable, "-c", "import subprocess, sys; subprocess.run(['sleep', '30'])"]
    )
    children: set[int] = set()
    try:
        children = wait_until(lambda: child_pids(parent.pid), timeout=10)
        (child,) = children
        assert child != parent.pid
        assert child_pids(child) == set()
    finally:
        for pid in children:
            os.kill(pid, signal.SIGKILL)
        parent.kill()
        parent.wait()
