"""Hard limits on runs on workers: a run past its ``max_duration`` and a grace loses its process.

A job is asked to stop at its ``max_duration`` (``should_stop()``); one that ignores it would
keep its worker process for ever. So each worker process tells its pool, through a pipe,
when a run with a ``max_duration`` starts (its hard deadline, on the machine's monotonic
clock, which every process shares) and when it ends; the pool kills a process whose run is
still going at its hard deadline, records the run failed with the reason in words (the job's
retry policy applies) and starts a new process in its place. A process with a run past its
``max_duration`` takes no more work meanwhile, so the kill costs as few other runs as it can.

The deciding is pure (:func:`hard_deadline`, :func:`overdue`, :func:`parse_report`); the
child's half is :class:`PipeWatch`, the pool's half :class:`Deadlines`.
"""

import logging
import os
import threading
import time
from dataclasses import dataclass
from typing import Protocol

logger = logging.getLogger(__name__)

#: The environment variable that gives a worker process the pipe to its pool.
REPORT_FD_ENV = "INSTATIC_WORKER_REPORT_FD"


class RunWatch(Protocol):
    """What a worker process tells about its runs' limits as they start and end."""

    def started(self, run, job) -> None: ...

    def ended(self, run) -> None: ...

    def overrun(self) -> bool: ...


class NoWatch:
    """No pool watches this process (a test, another backend's worker): nothing to tell."""

    def started(self, run, job) -> None:
        pass

    def ended(self, run) -> None:
        pass

    def overrun(self) -> bool:
        return False


@dataclass(frozen=True)
class Limit:
    """A run with a hard deadline, as its pool knows it."""

    run_id: int
    attempt: int
    instance: str
    #: When the job should have stopped (``max_duration``), monotonic seconds.
    soft: float
    #: When the process is killed, monotonic seconds.
    hard: float
    #: The limit in words, for the run's error.
    words: str


def hard_deadline(started: float, max_duration: float, grace: float) -> float:
    """Return when a run started at ``started`` (monotonic) is ended with its process."""
    return started + max_duration + max(0.0, grace)


def overdue(limits: list[Limit], now: float) -> list[Limit]:
    """Return the runs still going at their hard deadline."""
    return [limit for limit in limits if now >= limit.hard]


def report_line(kind: str, limit: Limit | None = None, *, run_id: int | None = None) -> bytes:
    """Return one line of the pipe: ``start`` with the limit, or ``end`` with the run's id."""
    if kind == "start":
        return (
            f"start {limit.run_id} {limit.attempt} {limit.instance} {limit.soft!r} "
            f"{limit.hard!r} {limit.words}\n"
        ).encode()
    return f"end {run_id}\n".encode()


def parse_report(line: str) -> tuple[str, Limit | int] | None:
    """Parse one line of the pipe: ``("start", Limit)``, ``("end", run id)``, or ``None``."""
    parts = line.strip().split(" ", 6)
    try:
        if parts[0] == "start" and len(parts) == 7:
            return "start", Limit(
                run_id=int(parts[1]),
                attempt=int(parts[2]),
                instance=parts[3],
                soft=float(parts[4]),
                hard=float(parts[5]),
                words=parts[6],
            )
        if parts[0] == "end" and len(parts) == 2:
            return "end", int(parts[1])
    except ValueError:
        return None
    return None


class PipeWatch:
    """A worker process's half: it writes its runs' limits to the pipe its pool reads."""

    def __init__(self, fd: int, *, instance: str, grace: float):
        self.fd = fd
        self.instance = instance
        self.grace = grace
        self._lock = threading.Lock()
        self._soft: dict[int, float] = {}

    def started(self, run, job) -> None:
        if not job.max_duration:
            return
        now = time.monotonic()
        seconds = job.max_duration.total_seconds()
        limit = Limit(
            run_id=run.pk,
            attempt=run.attempt,
            instance=self.instance,
            soft=now + seconds,
            hard=hard_deadline(now, seconds, self.grace),
            words=(
                f"ran past its max_duration of {job.max_duration} and {self.grace:g} s more "
                "(INSTATIC_WORKER_KILL_GRACE) without stopping; its worker process was killed"
            ),
        )
        with self._lock:
            self._soft[run.pk] = limit.soft
            self._write(report_line("start", limit))

    def ended(self, run) -> None:
        with self._lock:
            if self._soft.pop(run.pk, None) is not None:
                self._write(report_line("end", run_id=run.pk))

    def overrun(self) -> bool:
        """Return whether a run of this process is past its ``max_duration``."""
        now = time.monotonic()
        with self._lock:
            return any(now >= soft for soft in self._soft.values())

    def _write(self, line: bytes) -> None:
        try:
            os.write(self.fd, line)
        except OSError as exc:  # the pool is gone: the kernel ends this process with it
            logger.warning("cannot tell the worker pool about a run's limit: %s", exc)


def watch_from_environment(*, instance: str, grace: float) -> RunWatch:
    """Return this process's watch: the pipe its pool gave it, or none."""
    fd = os.environ.get(REPORT_FD_ENV, "")
    if not fd.isdigit():
        return NoWatch()
    return PipeWatch(int(fd), instance=instance, grace=grace)
