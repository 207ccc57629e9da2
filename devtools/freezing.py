"""Freezing a process for a fault: SIGSTOP, and the wait until it has taken hold.

``kill(pid, SIGSTOP)`` returns once the signal is queued, not once the process is stopped.
The kernel wakes one of the process's threads to begin the stop; every other thread stops only
as it next passes through the kernel, so on a busy machine a thread that is running, or that
its socket wakes meanwhile, goes on for a while. A test that freezes a scheduler waiting at a
commit gate and then opens the gate could see that scheduler's ``COMMIT`` go through.
:func:`freeze` returns only once every thread of the process is stopped.
"""

import os
import signal
import time
from pathlib import Path

#: Thread states (``/proc/<pid>/task/<tid>/stat``) in which a thread runs no more code: stopped
#: by a signal or a tracer, or already exited.
STILL = frozenset("TtZX")

#: How often :func:`freeze` looks at the threads' states.
LOOK_EVERY = 0.001


def thread_states(pid: int) -> list[str]:
    """Return the state letter of each thread of process ``pid`` (none once it is gone)."""
    states = []
    for stat in Path(f"/proc/{pid}/task").glob("*/stat"):
        try:
            text = stat.read_text()
        except (FileNotFoundError, ProcessLookupError):
            continue  # a thread that ended as it was read
        states.append(text[text.rindex(")") + 2])
    return states


def all_still(states: list[str]) -> bool:
    """Whether threads in ``states`` run no more code (a process with none has ended)."""
    return all(state in STILL for state in states)


def freeze(pid: int, *, within: float = 30.0) -> None:
    """Stop process ``pid`` (SIGSTOP) and return once every one of its threads is stopped.

    Raises ``ProcessLookupError`` if the process is gone, ``TimeoutError`` if a thread is
    still running after ``within`` seconds (the message lists the threads' states).
    """
    os.kill(pid, signal.SIGSTOP)
    deadline = time.monotonic() + within
    while not all_still(states := thread_states(pid)):
        if time.monotonic() > deadline:
            raise TimeoutError(f"process {pid} not stopped {within:.0f} s after SIGSTOP: {states}")
        time.sleep(LOOK_EVERY)
