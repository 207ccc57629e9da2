"""Pure-Python CPU work of a known length, for the CPU-bound jobs of ``bench/workers.py``.

Django-free, so the benchmark calibrates the loop in its own process (``calibrate``) before
any site process starts, and the jobs (``bench/_jobsapp``) run the same loop.
"""

import time


def burn(loops: int) -> int:
    """Spin ``loops`` times through a small arithmetic loop, holding the GIL throughout."""
    total = 0
    for i in range(loops):
        total = (total + i * i) % 1_000_003
    return total


def calibrate(seconds: float = 1.0, *, tries: int = 3) -> int:
    """Return the loops :func:`burn` needs for ``seconds`` on this machine now.

    The fastest of ``tries`` timings of a ~0.2 s probe is taken, so a moment of load from
    elsewhere on the machine makes a run longer, never the calibrated loop shorter.
    """
    loops = 100_000
    while True:
        started = time.perf_counter()
        burn(loops)
        if time.perf_counter() - started >= 0.2:
            break
        loops *= 2
    best = min(_timed(loops) for _ in range(tries))
    return max(1, round(loops * seconds / best))


def _timed(loops: int) -> float:
    started = time.perf_counter()
    burn(loops)
    return time.perf_counter() - started
