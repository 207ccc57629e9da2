"""``BENCH_JOBS`` plugin jobs, all every minute (so all due at the same instant).

Each run appends one line (job, slot, node, start lateness) to a file of its process in
``BENCH_EFFECTS_DIR`` and touches no database table, so the statements the benchmark counts
are the engine's own, and a slot run twice shows as two lines whatever the ledger says.
"""

import os
import threading
import time
from datetime import timedelta

from django.conf import settings

from plugins.sdk import JobContext, every, plugin_job

_lock = threading.Lock()
_fd: int | None = None


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
        schedule=every(timedelta(minutes=1)),
        transactional=settings.BENCH_TRANSACTIONAL,
    )(run)


for _number in range(settings.BENCH_JOBS):
    _declare(_number)
