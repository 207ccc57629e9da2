"""How much a worker process holds and takes: pure functions of its threads, the pace of its
runs and what is outstanding, which ``process.WorkerProcess`` applies at each look.
"""

import math

#: How far ahead (seconds of its threads' work) a worker process takes runs: enough that its
#: threads never wait for the next claim, few enough that a slow job's runs are left to other
#: processes rather than queued behind each other here.
TAKE_AHEAD = 0.25

#: The most runs one worker process holds at once, however short its runs are.
MAX_HELD = 256


def refill(free: int, capacity: int) -> bool:
    """Return whether a worker process looks for more work now: once half of what it may
    hold (``capacity``, :func:`take_ahead`) is free, so that it takes tasks in batches rather
    than one each time a run ends; at once when it holds nothing."""
    return free > 0 and (free == capacity or free >= max(1, capacity // 2))


def take_ahead(threads: int, run_seconds: float | None) -> int:
    """Return how many runs a worker process may hold at once: one per thread, and as many
    taken ahead as its threads start within ``TAKE_AHEAD`` at the pace of its recent runs
    (``run_seconds``, each run's job function's time), at most ``MAX_HELD``.

    Before any run has ended here the pace is unknown: one run ahead per thread. Short runs
    (a burst of trivial ones) are then taken by the hundred, in a few claims, instead of
    sixteen at a time; a slow job's runs (a second each) are taken barely ahead of the
    threads, so that the other processes get their share.
    """
    if run_seconds is None:
        return min(MAX_HELD, 2 * threads)
    ahead = math.ceil(threads * TAKE_AHEAD / max(run_seconds, 1e-4))
    return max(threads + 1, min(MAX_HELD, threads + ahead))


#: The most ready tasks a worker process that does not know its pace yet counts to find its
#: share (:func:`first_share`): enough for every process to take ``MAX_HELD``.
READY_COUNTED = 64 * MAX_HELD


def first_share(threads: int, outstanding: int, workers: int) -> int:
    """Return how many runs a worker process holds before it knows the pace of its runs: its
    share of the ``outstanding`` tasks (ready, and those taken by the processes that looked
    first) among the ``workers`` worker processes (itself included), at least one ahead per
    thread (:func:`take_ahead`), at most ``MAX_HELD``.

    A burst of a thousand trivial runs is then taken in one claim per process as soon as it
    is queued, not sixteen at a time until each process's first run has ended; slow runs are
    shared out evenly, never gathered by the first process to look. Counting what the
    others took keeps the last process to look from a share of only what they left, and the
    rest of the burst from waiting for its next look.
    """
    share = math.ceil(outstanding / max(1, workers))
    return min(MAX_HELD, max(take_ahead(threads, None), share))


def worker_threads(configured: int, vendor: str) -> int:
    """Return how many runs one worker process executes at once: ``INSTATIC_WORKER_THREADS``
    (at least 1), but 1 on SQLite, whose one writer would make the threads' runs wait on each
    other's transactions (and fail with "database is locked" past its timeout)."""
    if vendor == "sqlite":
        return 1
    return max(1, int(configured))
