"""The bench-only plugin jobs.

- ``BENCH_JOBS`` jobs ``job_NNNN``, every ``BENCH_PERIOD_SECONDS`` (a minute), so all due at
  the same instant. Each run appends one line (job, slot, node, start lateness) to a file of
  its process in ``BENCH_EFFECTS_DIR`` and touches no database table, so the statements the
  benchmark counts are the engine's own, and a slot run twice shows as two lines whatever
  the ledger says.
- ``BENCH_CPU_JOBS`` jobs ``cpu_NN``, run only on request: ``BENCH_CPU_LOOPS`` turns of
  pure-Python work (``bench._cpu.burn``), calibrated by the benchmark to about a second.
- ``ping`` (with ``BENCH_PING=1``), run only on request, doing nothing: the queue's own
  wait is what is measured.

All run where ``BENCH_RUN_ON`` says (``leader`` or ``workers``).
"""

import os
import threading
import time
from datetime import timedelta

from django.conf import settings

from bench._cpu import burn
from plugins.sdk import JobContext, every, plugin_job

_lock = threading.Lock()
_fd: int | None = None
#: The schedule of the jobs run only on request: a slot a year, skipped if missed.
_RARELY = every(timedelta(days=365))


def _effects_fd() -> int:
    global _fd
    with _lock:
        if _fd is None:
            path = os.path.join(settings.BENCH_EFFECTS_DIR, f"effects-{os.getpid()}.txt")
            _fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        return _fd


def record(ctx: JobContext) -> None:
    """Write this run's line: one ``write()`` on an ``O_APPEND`` file, whole or not at all."""
    lateness = time.time() - ctx.slot.timestamp()
    line = f"{ctx.job.name} {ctx.slot.isoformat()} {ctx.node} {lateness:.6f}\n"
    os.write(_effects_fd(), line.encode())


def _declare(number: int) -> None:
    def run(ctx: JobContext) -> None:
        record(ctx)

    run.__qualname__ = f"job_{number:04d}"
    plugin_job(
        plugin="benchjobs",
        name=f"job_{number:04d}",
        schedule=every(timedelta(seconds=settings.BENCH_PERIOD_SECONDS)),
        transactional=settings.BENCH_TRANSACTIONAL,
        run_on=settings.BENCH_RUN_ON,
    )(run)


def _declare_cpu(number: int) -> None:
    def run(ctx: JobContext) -> None:
        burn(settings.BENCH_CPU_LOOPS)

    run.__qualname__ = f"cpu_{number:02d}"
    plugin_job(
        plugin="benchjobs",
        name=f"cpu_{number:02d}",
        schedule=_RARELY,
        missed="skip",
        run_on=settings.BENCH_RUN_ON,
    )(run)


for _number in range(settings.BENCH_JOBS):
    _declare(_number)
for _number in range(settings.BENCH_CPU_JOBS):
    _declare_cpu(_number)


def ping(ctx: JobContext) -> None:
    """Do nothing: what a run on request waits for is the engine's own."""


if settings.BENCH_PING:
    plugin_job(
        plugin="benchjobs",
        name="ping",
        schedule=_RARELY,
        missed="skip",
        run_on=settings.BENCH_RUN_ON,
    )(ping)
