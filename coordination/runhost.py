"""What a run needs from the loop that starts it: the :class:`RunHost` protocol.

A :class:`coordination.runner.Worker` sees its group's loop only through this interface, so
the worker can be read (and run, in tests) without the loop, and the loop can change how it
plans and supervises without reaching into the runs. ``GroupLoop`` satisfies it.
"""

from collections.abc import Callable
from datetime import datetime
from typing import Protocol, runtime_checkable

from coordination.journal import ClaimJournal
from coordination.liveness import NodeIdentity
from coordination.registry import Job


class Clock(Protocol):
    """The database's time, as the host estimates it between queries."""

    def now(self) -> datetime: ...


@runtime_checkable
class RunHost(Protocol):
    """The group loop, as one run of one of its jobs sees it."""

    @property
    def node(self) -> NodeIdentity:
        """This scheduler process: its node name and instance, written on every run row."""

    @property
    def clock(self) -> Clock:
        """The database clock (lateness, deadlines, retry times, a when-due job's next slot)."""

    @property
    def journal(self) -> ClaimJournal:
        """Where committed runs are remembered, so a failover that loses them is noticed."""

    @property
    def log_prefix(self) -> str:
        """The group's log prefix, e.g. ``plugin-scheduler``."""

    @property
    def stopping(self) -> bool:
        """True once the process is shutting down."""

    @property
    def leading(self) -> bool:
        """True while the host believes it holds its group's lock."""

    def fence_work_transaction(self, connection) -> bool:
        """Check, just before the run's commit on ``connection``, that the group's lock is
        still held (``LeaderLock.fence_work_transaction``): in lease mode inside that open
        transaction, so a commit after the lease passed on fails in the database; for the
        other locks the lock's own check of its session."""

    def hold_off(self, job_name: str) -> bool:
        """Keep ``job_name`` from being planned for a while; True for a streak's first hold."""

    def release_hold(self, job_name: str) -> None:
        """End ``job_name``'s hold-off streak: a run of it got going."""

    def submit(self, task: Callable[[], None]) -> None:
        """Queue ``task`` on the group's job threads, behind the runs waiting there."""

    def request_maintenance(self) -> None:
        """Ask for the next tick to look for runs waiting for a retry."""

    def function_ended(self, seconds: float) -> None:
        """A run's job function returned after ``seconds``, before its outcome is written."""

    def finish_run(self, run, job: Job, outcome) -> bool | None:
        """Record a claim-first run's outcome (``ledger.RunOutcome``) and its job's state, both
        or neither, while the run is still this node's attempt; return whether that paused the
        job, or ``None`` if the run was taken over (``ledger.finish_with_state``)."""

    def report_outcome(
        self,
        job: Job,
        slot: datetime,
        status: str,
        duration: float,
        *,
        error: BaseException | None = None,
        paused: bool = False,
    ) -> None:
        """Log a recorded outcome, count it in the metrics, alert on failures."""

    def run_finished(self, job_name: str, *, as_planned: bool) -> None:
        """Wake the host for a run that ended (see ``GroupLoop.run_finished``)."""

    def cut_off(self, what: str) -> None:
        """Note work of this process that was cut off (``--once`` then exits non-zero)."""

    def database_failed(self, exc: BaseException) -> None:
        """Note a database error (the process's database health)."""

    def grace_deadline(self) -> float:
        """The monotonic time by which a shutdown stops waiting for runs."""
