"""A pool of worker processes beside the scheduler: start them, keep them running, stop them.

Workers are processes, not threads, so a CPU-bound job uses another core and a stuck one can
be killed. Each child is ``manage.py runworker --process I --node-name NAME`` with this
process's environment, and dies with its parent: on Linux the kernel sends it SIGKILL when
the thread that started it exits (``PR_SET_PDEATHSIG``), so a parent killed with SIGKILL
leaves no orphan workers. That is why one thread, the pool's supervisor, starts every child,
restarts the ones that exit unexpectedly and stops them all at the end.

Each child also tells the pool, through a pipe, the hard deadline of each run it starts with a
``max_duration`` (``limits.py``): the supervisor kills a child whose run is still going at its
deadline, has the run recorded failed (``overruns.py``) and starts the child again.

Deciding when to start a child again is :func:`plan_restart`, whether the pool is healthy
:func:`pool_problems` (both pure); the supervisor does them.
"""

import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings as django_settings

from coordination.parent_death import die_with_parent
from coordination.workers.limits import REPORT_FD_ENV, Limit, overdue, parse_report
from coordination.workers.meeting import worker_node_name

logger = logging.getLogger(__name__)

#: Least seconds between two starts of one child (its first gap; it doubles while the child
#: keeps exiting sooner, up to :data:`MAX_RESTART_GAP`).
RESTART_INTERVAL = 3.0
MAX_RESTART_GAP = 60.0
#: How often the supervisor looks at its children.
SUPERVISE_POLL = 0.1
#: A child that exits this many times within :data:`CRASH_WINDOW` seconds makes the pool
#: unhealthy (``/healthz``) until it has kept running that long.
CRASH_EXITS = 3
CRASH_WINDOW = 60.0


@dataclass(frozen=True)
class Restart:
    """When to start an exited child again, and the gap that holds after that start."""

    #: Seconds from the exit to the next start.
    delay: float
    #: Least seconds between the next start and the one after it.
    gap: float


def plan_restart(
    *, lived: float, gap: float, interval: float = RESTART_INTERVAL, cap: float = MAX_RESTART_GAP
) -> Restart:
    """Decide when to start again a child that exited after ``lived`` seconds.

    A child that lived at least ``gap`` seconds starts again at once and the gap goes back to
    ``interval``. One that exited sooner (it crashes at start) starts again ``gap`` seconds
    after its last start, and the gap doubles, up to ``cap``: a child that cannot start costs
    a few starts a minute, not a busy loop, and at most one start per ``interval`` ever.
    """
    if lived >= gap:
        return Restart(delay=0.0, gap=interval)
    return Restart(delay=gap - lived, gap=min(cap, gap * 2))


def describe_exit(returncode: int) -> str:
    """Return how a child ended, in words (``exited with code 1``, ``was killed by SIGKILL``)."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"was killed by {name}"
    return f"exited with code {returncode}"


def pool_problems(exits: dict[int, list[float]], now: float) -> list[str]:
    """Return why a pool cannot keep its processes up, in words (empty: it can).

    ``exits`` are each child's unexpected exits (monotonic times; the pool's own kills of a
    run past its hard limit are not counted). A child that exited :data:`CRASH_EXITS` times
    within the last :data:`CRASH_WINDOW` seconds is crash-looping.
    """
    problems = []
    for index, times in sorted(exits.items()):
        recent = [t for t in times if now - t <= CRASH_WINDOW]
        if len(recent) >= CRASH_EXITS:
            problems.append(
                f"worker process {index} exited {len(recent)} times in the last {CRASH_WINDOW:g} s"
            )
    return problems


@dataclass
class _Child:
    index: int
    process: subprocess.Popen | None = None
    started_at: float = 0.0
    gap: float = RESTART_INTERVAL
    restart_at: float | None = None
    #: The read end of the pipe the child reports its runs' limits on.
    reports: int | None = None
    pending: bytes = b""
    limits: dict[int, Limit] = field(default_factory=dict)
    #: Set when the pool killed it for a run past its hard limit (not a crash).
    killed: bool = False
    exits: list[float] = field(default_factory=list)


class WorkerPool:
    """``count`` worker processes of node ``node_name``, kept running until :meth:`stop`."""

    def __init__(self, *, count: int, node_name: str, restart_interval: float = RESTART_INTERVAL):
        if count < 1:
            raise ValueError("a worker pool needs at least one process")
        self.node_name = node_name
        self.restart_interval = restart_interval
        self._children = [_Child(index=i, gap=restart_interval) for i in range(1, count + 1)]
        self._stop_deadline: float | None = None
        self._stopping = threading.Event()
        self._thread = threading.Thread(
            target=self._supervise, name=f"worker-pool-{node_name}", daemon=True
        )

    # --- control, from any thread (begin_stop also from a signal handler) ------------------
    def start(self) -> None:
        logger.info(
            "starting %d worker process(es) for node %s", len(self._children), self.node_name
        )
        self._thread.start()

    def begin_stop(self, grace: float) -> None:
        """Ask every child to stop (SIGTERM) and kill what is left after ``grace`` seconds.

        Does not wait; a second call keeps the first deadline.
        """
        if self._stop_deadline is None:
            self._stop_deadline = time.monotonic() + max(0.0, grace)
        self._stopping.set()

    def stop(self, grace: float) -> None:
        """Stop every child within ``grace`` seconds (SIGTERM, then SIGKILL) and wait for it."""
        self.begin_stop(grace)
        if self._thread.ident is not None:
            self._thread.join()

    def running(self) -> bool:
        """Return whether the supervisor is looking after the children (until they stopped)."""
        return self._thread.is_alive()

    def problems(self) -> list[str]:
        """Return why this pool cannot keep its processes up (``pool_problems``)."""
        exits = {c.index: list(c.exits) for c in self._children}
        return pool_problems(exits, time.monotonic())

    def pids(self) -> list[int]:
        """Return the process ids of the children running now."""
        return [c.process.pid for c in self._children if c.process and c.process.poll() is None]

    # --- the supervisor thread ----------------------------------------------------------------
    def _supervise(self) -> None:
        try:
            while not self._stopping.is_set():
                self._look_after(time.monotonic())
                self._stopping.wait(SUPERVISE_POLL)
        except Exception:
            logger.exception(
                "the worker pool of node %s crashed; stopping its workers", self.node_name
            )
            self.begin_stop(0.0)
        finally:
            self._stop_all()

    def _look_after(self, now: float) -> None:
        for child in self._children:
            process = child.process
            if process is not None and process.poll() is None:
                self._read_reports(child)
                late = overdue(list(child.limits.values()), time.monotonic())
                if late:
                    self._kill_overrun(child, late)
            if process is not None and process.poll() is not None:
                self._exited(child, now)
            if child.process is None and (child.restart_at is None or now >= child.restart_at):
                self._spawn(child, now)

    def _read_reports(self, child: _Child) -> None:
        """Read what the child said about its runs' limits since the last look."""
        if child.reports is None:
            return
        while True:
            try:
                data = os.read(child.reports, 65536)
            except BlockingIOError:
                break
            if not data:
                break
            child.pending += data
        *lines, child.pending = child.pending.split(b"\n")
        for line in lines:
            report = parse_report(line.decode(errors="replace"))
            if report is None:
                continue
            kind, value = report
            if kind == "start":
                child.limits[value.run_id] = value
            else:
                child.limits.pop(value, None)

    def _kill_overrun(self, child: _Child, late: list[Limit]) -> None:
        """Kill a child whose runs are past their hard limit; record them from a thread of
        their own (a transactional run's row is free only once the server has seen the
        session go), and let the next look start the child again."""
        name = worker_node_name(self.node_name, child.index)
        logger.error(
            "worker process %d (pid %d) of node %s: run(s) %s past their hard limit; "
            "killing the process",
            child.index,
            child.process.pid,
            self.node_name,
            ", ".join(str(limit.run_id) for limit in late),
        )
        with contextlib.suppress(ProcessLookupError):
            child.process.kill()
        child.process.wait()
        child.killed = True
        child.limits.clear()
        from coordination.workers.overruns import record_overruns

        threading.Thread(
            target=record_overruns,
            args=(late,),
            kwargs={"node_name": name},
            name=f"worker-overrun-{child.index}",
            daemon=True,
        ).start()

    def _exited(self, child: _Child, now: float) -> None:
        restart = plan_restart(
            lived=now - child.started_at, gap=child.gap, interval=self.restart_interval
        )
        logger.warning(
            "worker process %d (pid %d) of node %s %s; starting it again in %.1fs",
            child.index,
            child.process.pid,
            self.node_name,
            describe_exit(child.process.returncode),
            restart.delay,
        )
        if child.killed:
            restart = Restart(delay=0.0, gap=self.restart_interval)
        else:
            child.exits = [t for t in child.exits if now - t <= CRASH_WINDOW] + [now]
        self._close_reports(child)
        child.process = None
        child.killed = False
        child.gap = restart.gap
        child.restart_at = now + restart.delay

    @staticmethod
    def _close_reports(child: _Child) -> None:
        if child.reports is not None:
            with contextlib.suppress(OSError):
                os.close(child.reports)
        child.reports, child.pending = None, b""
        child.limits.clear()

    def _spawn(self, child: _Child, now: float) -> None:
        command = [
            sys.executable,
            str(Path(django_settings.BASE_DIR) / "manage.py"),
            "runworker",
            "--process",
            str(child.index),
            "--node-name",
            self.node_name,
        ]
        read, write = os.pipe()
        os.set_blocking(read, False)
        env = {**os.environ, REPORT_FD_ENV: str(write)}
        try:
            child.process = subprocess.Popen(
                command, preexec_fn=die_with_parent(), pass_fds=(write,), env=env
            )
        except OSError as exc:
            os.close(read)
            os.close(write)
            restart = plan_restart(lived=0.0, gap=child.gap, interval=self.restart_interval)
            logger.warning(
                "cannot start worker process %d of node %s (%s); trying again in %.1fs",
                child.index,
                self.node_name,
                exc,
                restart.delay,
            )
            child.gap, child.restart_at = restart.gap, now + restart.delay
            return
        os.close(write)
        child.reports = read
        child.started_at = now
        child.restart_at = None
        logger.info(
            "worker process %d of node %s started (pid %d)",
            child.index,
            self.node_name,
            child.process.pid,
        )

    def _stop_all(self) -> None:
        running = [c for c in self._children if c.process is not None and c.process.poll() is None]
        for child in running:
            with contextlib.suppress(ProcessLookupError):
                child.process.terminate()
        deadline = self._stop_deadline if self._stop_deadline is not None else time.monotonic()
        for child in running:
            try:
                child.process.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.process.kill()
                child.process.wait()
                logger.warning(
                    "worker process %d (pid %d) of node %s did not stop within the grace "
                    "period (INSTATIC_SHUTDOWN_GRACE); killed it",
                    child.index,
                    child.process.pid,
                    self.node_name,
                )
        logger.info("worker processes of node %s stopped", self.node_name)
