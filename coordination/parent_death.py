"""A child process that the kernel signals when its parent dies (Linux's ``PR_SET_PDEATHSIG``).

Worker processes die with their scheduler; the test runner's pytest and the processes the
tests start are stopped with theirs. Only the standard library: the test runner uses it before
Django is set up.
"""

import ctypes
import os
import signal
import sys
from collections.abc import Callable

_PR_SET_PDEATHSIG = 1


def die_with_parent(sig: int = signal.SIGKILL) -> Callable[[], None] | None:
    """Return a ``preexec_fn`` that has the kernel send ``sig`` to the child when the thread
    that starts it (in practice its parent) ends.

    ``None`` where there is no ``prctl`` (not Linux): there, a parent killed with SIGKILL
    leaves its children running until they are stopped. The function only calls ``prctl`` and
    ``getppid`` (no locks, no imports), which keeps it safe in a process with other threads.
    """
    if not sys.platform.startswith("linux"):
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    parent = os.getpid()

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, sig)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os._exit(1)

    return preexec
