"""Running one job for one slot: the transactional and the claim-first paths.

A transactional job runs inside one transaction together with its ledger row and its next
slot, so a crash rolls all of it back and the next leader runs the slot again. Any other job
has its ledger row committed as ``running`` first; if its node dies the row becomes
``abandoned`` and the job's ``retry_abandoned`` decides what happens.

A worker runs exactly one slot, and sees the group's loop only as its :class:`RunHost`
(``coordination.runhost``). As it ends it wakes the loop, which plans again whenever
something may be due (a run-now request, a slot come due behind the run, a retry, a wake-up it
heard), so neither waits behind a backlog; a scheduled run that ended as planned only has its
worker forgotten (see ``GroupLoop.run_finished``).
"""

import logging
import threading
import time
import traceback
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TypeVar

from django.db import IntegrityError, OperationalError, connection, transaction

from coordination import journal, ledger
from coordination.dberrors import DATABASE_ERRORS, Backoff
from coordination.logcontext import job_log_context
from coordination.models import JobRun
from coordination.planner import RunPlan
from coordination.registry import JobContext
from coordination.runhost import RunHost
from coordination.threads import discard_broken_connection

logger = logging.getLogger(__name__)

T = TypeVar("T")


class JobTimedOut(Exception):
    """Raised inside a transactional run that outlived its max duration, to roll it back."""


class SlotTaken(Exception):
    """The (job, slot) ledger row already exists: another node ran or is running it."""


class RetryTaken(Exception):
    """The run to retry was taken by another attempt, or no longer waits for one."""


class LeadershipLost(Exception):
    """Raised inside a transactional run when the lock is gone before commit."""


class PreviousRunAlive(Exception):
    """Another node's run of this job still holds the job's state row: do not overlap it."""


#: PostgreSQL's lock_not_available; MySQL's and MariaDB's NOWAIT refusals.
_LOCK_UNAVAILABLE_SQLSTATE = "55P03"
_LOCK_UNAVAILABLE_MYSQL = {1205, 3572}


def _lock_unavailable(exc: OperationalError) -> bool:
    """Return True if ``exc`` says a ``NOWAIT`` row lock is held by someone else."""
    cause = exc.__cause__
    if getattr(cause, "sqlstate", None) == _LOCK_UNAVAILABLE_SQLSTATE:
        return True
    return bool(exc.args) and exc.args[0] in _LOCK_UNAVAILABLE_MYSQL


def when_due_next(answer: object, fallback: datetime | None) -> datetime | None:
    """Return when a when-due job is next due after a run: the earlier of the instant the
    job answered (if it answered one) and its schedule's safety net, where ``None`` (the end
    of the calendar) is no instant; ``None`` when neither is one: no next slot."""
    answered = answer if isinstance(answer, datetime) else None
    return min((t for t in (answered, fallback) if t is not None), default=None)


class Worker:
    """One plan run on one of the group's job threads; a job never runs while its worker does."""

    def __init__(
        self,
        host: RunHost,
        plan: RunPlan,
        *,
        outcomes: Callable[[Callable[[], None]], None] | None = None,
        on_end: Callable[[], None] | None = None,
    ):
        self.host = host
        #: Where a claim-first run's outcome is written once its function returns: the host's
        #: ``submit`` unless the caller queues it elsewhere (a worker process's threads).
        self._outcomes = outcomes or host.submit
        #: Called once the worker is done (its outcome recorded), on the thread that ends it.
        self._on_end = on_end
        self._started = False
        #: Set when the worker is done (its outcome recorded), just before it wakes the loop.
        self._ended = threading.Event()
        #: Set once the job's function has returned (its outcome may still be on its way).
        self.function_returned = False
        self.plan = plan
        self.job = plan.job
        self.slot = plan.slot
        self.started_mono = time.monotonic()
        max_duration = self.job.max_duration
        self.deadline_mono = (
            self.started_mono + max_duration.total_seconds() if max_duration else None
        )
        self.timed_out = False
        self.current_run: JobRun | None = None

    @property
    def log_prefix(self) -> str:
        return self.host.log_prefix

    def past_deadline(self) -> bool:
        return self.deadline_mono is not None and time.monotonic() > self.deadline_mono

    def should_stop(self) -> bool:
        return self.timed_out or self.past_deadline() or self.host.stopping or not self.host.leading

    def mark_started(self) -> None:
        """Count this worker as running from now (its job is busy): the loop queues it, and a
        job thread calls ``run()`` (``GroupLoop._start_workers``)."""
        self._started = True

    def is_alive(self) -> bool:
        # Not only until a job thread is done with it: the loop that the worker's end wakes
        # must see it finished, or it skips the job and sleeps a whole tick.
        return self._started and not self._ended.is_set()

    def join(self, timeout: float | None = None) -> None:
        if self._started:
            self._ended.wait(timeout)

    def run(self) -> None:
        """Run the plan on a job thread (a claim-first run's outcome follows as a task of its
        own, see ``_run_claim_first``)."""
        self._step(self._run)

    def _run(self) -> bool:
        if self.job.transactional:
            self._run_transactional()
            return False
        return self._run_claim_first()

    def _step(self, step: Callable[[], bool]) -> None:
        """Run one step of this worker; end the worker unless the step queued the next one."""
        as_planned = False
        queued = False
        try:
            queued = step()
            if not queued:
                self.host.release_hold(self.job.name)
                as_planned = self._left_as_planned()
        except PreviousRunAlive:
            if self.host.hold_off(self.job.name):
                logger.info(
                    "[%s] job %s slot %s waits: its previous run still holds it on another node",
                    self.log_prefix,
                    self.job.name,
                    self.slot.isoformat(),
                )
        except Exception:
            logger.exception(
                "[%s] job %s: unexpected scheduler error", self.log_prefix, self.job.name
            )
            self.host.hold_off(self.job.name)
        finally:
            if not queued:
                self._ended.set()
                self.host.run_finished(self.job.name, as_planned=as_planned)
                if self._on_end is not None:
                    self._on_end()

    def _left_as_planned(self) -> bool:
        """Return True if this run leaves its job's next slot where the tick planned it, in the
        future: a scheduled periodic slot (a manual run, a retry, a when-due job, a slot caught
        up behind others make the loop plan again)."""
        plan = self.plan
        return (
            self.job.schedule.periodic
            and plan.trigger == JobRun.Trigger.SCHEDULE
            and plan.retry_run is None
            and plan.next_due is not None
            and plan.next_due > self.host.clock.now()
        )

    def _context(self) -> JobContext:
        deadline = None
        if self.job.max_duration:
            deadline = self.host.clock.now() + self.job.max_duration
        return JobContext(
            job=self.job,
            slot=self.slot,
            node=self.host.node.name,
            logger=logging.getLogger(f"instatic.jobs.{self.job.name}"),
            deadline=deadline,
            trigger=self.plan.trigger,
            _stop=self.should_stop,
        )

    def _call(self):
        """Run the job's function, or raise the refusal the loop was given for this run."""
        if self.plan.refusal is not None:
            raise self.plan.refusal
        return self.job.func(self._context())

    def _log_context(self, run: JobRun):
        """Name this run in every log line the job writes (JSON logs: node, job, slot, run_id)."""
        return job_log_context(
            node=self.host.node.name,
            group=self.job.group,
            job=self.job.name,
            slot=self.slot,
            run_id=run.pk,
        )

    def _lock_state(self) -> None:
        """Lock the job's state row for this transaction, or raise ``PreviousRunAlive``.

        A transactional run holds this row lock until it commits or rolls back, so a run that
        an ex-leader still has in flight (it lost only its lock) is seen here and not
        overlapped. ``NOWAIT``: the loop tries again shortly instead of blocking a thread.
        SQLite has no row locks (and one host-level leader), so there this is a no-op.
        """
        try:
            ledger.lock_state_nowait(self.job.name)
        except OperationalError as exc:
            if not _lock_unavailable(exc):
                raise
            raise PreviousRunAlive from exc

    def _claim(self) -> JobRun:
        """Insert this slot's ledger row inside the caller's transaction; raise ``SlotTaken``."""
        try:
            return ledger.claim(
                self.job,
                self.slot,
                trigger=self.plan.trigger,
                node=self.host.node.name,
                instance=self.host.node.instance,
                requested_by=self.plan.requested_by,
                savepoint=False,
            )
        except IntegrityError as exc:
            raise SlotTaken from exc

    def _take(self) -> JobRun:
        """Take this plan's ledger row inside the run's transaction: the queued row a worker
        process was given, the run to retry, or a new claim of the slot."""
        if self.plan.queued_run is not None:
            return self._take_queued()
        if self.plan.retry_run is not None:
            return self._claim_retry()
        return self._claim()

    def _take_queued(self) -> JobRun:
        """Move the queued row to running on this worker (``ledger.take_queued``); raise
        ``RetryTaken`` if another delivery of its task took it."""
        queued, node = self.plan.queued_run, self.host.node
        run = ledger.take_queued(queued.pk, queued.attempt, node=node.name, instance=node.instance)
        if run is None:
            raise RetryTaken
        return run

    def _claim_retry(self) -> JobRun:
        """Take the run this plan retries (in the caller's transaction); raise ``RetryTaken``."""
        node = self.host.node
        run = ledger.take_retry(self.plan.retry_run, node=node.name, instance=node.instance)
        if run is None:
            raise RetryTaken
        return run

    def _retry_at(self, status: str, attempt: int):
        """When this failed attempt is tried again (the job's ``retries``), or ``None``."""
        if status != JobRun.Status.FAILED:
            return None
        return self.job.retry_at(attempt, self.host.clock.now())

    def _retry_noted(self, retry_at, attempt: int) -> None:
        if retry_at is None:
            return
        logger.warning(
            "[%s] job %s slot %s: attempt %d of %d failed; trying again at %s",
            self.log_prefix,
            self.job.name,
            self.slot.isoformat(),
            attempt,
            self.job.retries + 1,
            retry_at.isoformat(),
        )
        # Maintenance lists the runs waiting for a retry, so the loop wakes for this one.
        self.host.request_maintenance()

    def _slot_taken(self) -> None:
        """Skip a slot already in the ledger, and make sure nothing plans it again."""
        logger.info(
            "[%s] job %s slot %s already claimed elsewhere; skipping",
            self.log_prefix,
            self.job.name,
            self.slot.isoformat(),
        )
        with transaction.atomic():
            self._claimed()

    def _claimed(self) -> None:
        """Mark the slot as dealt with: the job's next slot moves on, a run-now is served."""
        ledger.slot_dealt_with(self.job, self.plan.next_due, self.plan.manual_requested_at)

    def _outcome(
        self, status: str, *, duration, lateness, error: str, next_due, retry_at=None
    ) -> ledger.RunOutcome:
        """Return this run's outcome as the ledger records it (the run's row, the job's state);
        its job function has returned, which the host hears at once."""
        self.host.function_ended(duration)
        return ledger.RunOutcome(
            slot=self.slot,
            status=status,
            duration=duration,
            lateness=lateness,
            error=error,
            node=self.host.node.name,
            next_due=next_due,
            no_next_slot=next_due is None and not self.job.schedule.periodic,
            retry_at=retry_at,
            wake_before=self.plan.wake_before,
            manual_requested_at=self.plan.manual_requested_at,
        )

    def _lateness(self) -> float:
        return max(0.0, (self.host.clock.now() - self.slot).total_seconds())

    def _durably(self, what: str, write: Callable[[], T], *, atomic: bool = True) -> T | None:
        """Run ``write`` in a transaction (``atomic=False``: ``write`` sees to its own),
        retrying on a new connection while the database is away.

        A run's outcome must not be lost because the server dropped this thread's connection
        (a restart, a failover) between the job and its bookkeeping: left ``running`` under
        a live node, the slot would later be abandoned and perhaps run again. The worker keeps
        its job marked busy meanwhile; at shutdown it gives up once the grace period is over.
        """
        backoff = Backoff()
        while True:
            try:
                if not atomic:
                    return write()
                with transaction.atomic():
                    return write()
            except DATABASE_ERRORS as exc:
                self.host.database_failed(exc)
                connection.close()
                if self.host.stopping and time.monotonic() >= self.host.grace_deadline():
                    logger.error(
                        "[%s] job %s slot %s: could not record %s before shutdown: %s",
                        self.log_prefix,
                        self.job.name,
                        self.slot.isoformat(),
                        what,
                        exc,
                    )
                    return None
                time.sleep(backoff.next())

    # --- transactional --------------------------------------------------------------------
    def _run_transactional(self) -> None:
        job = self.job
        lateness = self._lateness()
        started = time.monotonic()
        result = None
        try:
            with transaction.atomic():
                self._lock_state()
                run = self._take()
                self.current_run = run
                with self._log_context(run):
                    result = self._call()
                if self.timed_out or self.past_deadline():
                    raise JobTimedOut(f"ran past its max_duration of {job.max_duration}")
                if not self.host.fence_work_transaction(connection):
                    raise LeadershipLost("the group's lock was lost before commit")
                outcome = self._outcome(
                    JobRun.Status.SUCCEEDED,
                    duration=time.monotonic() - started,
                    lateness=lateness,
                    error="",
                    next_due=self._next_due(result),
                )
                ledger.record_succeeded(run, job, outcome)
        except SlotTaken:
            self._slot_taken()
            return
        except RetryTaken:
            return
        except PreviousRunAlive:
            raise
        except LeadershipLost:
            self.host.cut_off(f"{job.name} slot {self.slot.isoformat()} rolled back")
            logger.warning(
                "[%s] job %s slot %s rolled back: lock lost mid-run; the new leader runs it",
                self.log_prefix,
                job.name,
                self.slot.isoformat(),
            )
            return
        except Exception as exc:
            duration = time.monotonic() - started
            status = (
                JobRun.Status.TIMED_OUT if isinstance(exc, JobTimedOut) else JobRun.Status.FAILED
            )
            self._record_transactional_failure(status, exc, duration, lateness)
            return
        self._remember(JobRun.Status.SUCCEEDED)
        self.host.report_outcome(
            job, self.slot, JobRun.Status.SUCCEEDED, time.monotonic() - started
        )

    def _remember(self, status: str) -> None:
        """Note a committed run in the loop's journal (a failover may make the ledger forget it).

        Retries are left out: their row was in the ledger before, so a lost retry leaves the
        run waiting for a retry again rather than missing.
        """
        if self.plan.retry_run is None:
            self.host.journal.record(
                journal.Entry(
                    job=self.job.name,
                    slot=self.slot,
                    transactional=self.job.transactional,
                    trigger=self.plan.trigger,
                    status=status,
                )
            )

    def _record_transactional_failure(self, status, exc, duration, lateness) -> None:
        """Record a rolled-back run as failed in a new transaction (the job's state too).

        That transaction is fenced as a run's own is before it commits: a leader that lost its
        lock, or stalls until its lease has passed to another node, records no failure for a
        slot the new leader runs. A refusal is not retried: the lock is gone for good.
        """
        job, plan, node = self.job, self.plan, self.host.node
        error = "".join(traceback.format_exception(exc))
        discard_broken_connection()
        if plan.queued_run is not None:
            attempt = plan.queued_run.attempt
        else:
            attempt = plan.retry_run.attempt + 1 if plan.retry_run else 1
        retry_at = self._retry_at(status, attempt)
        finished_at = self.host.clock.now()

        def record() -> bool:
            if not self.host.fence_work_transaction(connection):
                raise LeadershipLost("the group's lock was lost before the failure's commit")
            outcome = self._outcome(
                status,
                duration=duration,
                lateness=lateness,
                error=error,
                next_due=self._next_due(None),
                retry_at=retry_at,
            )
            recorded = ledger.record_failed(
                job,
                outcome,
                trigger=plan.trigger,
                instance=node.instance,
                started_at=finished_at - timedelta(seconds=duration),
                finished_at=finished_at,
                requested_by=plan.requested_by,
                retry_of=plan.retry_run,
                queued=plan.queued_run,
            )
            return recorded and ledger.record_outcome_in_state(job, outcome)

        try:
            paused = self._durably("its failure", record)
        except LeadershipLost:
            self.host.cut_off(f"{job.name} slot {self.slot.isoformat()} failed")
            logger.warning(
                "[%s] job %s slot %s failed after the lock was lost; leaving it to the new leader",
                self.log_prefix,
                job.name,
                self.slot.isoformat(),
            )
            return
        self._retry_noted(retry_at, attempt)
        self.host.report_outcome(job, self.slot, status, duration, error=exc, paused=bool(paused))

    # --- claim first ----------------------------------------------------------------------
    def _run_claim_first(self) -> bool:
        """Claim (unless the loop did), run the job; return True once its outcome is queued.

        The outcome is written by a task of its own, queued on the group's job threads
        behind the runs already waiting: when a thousand runs are due at once, every one of
        them starts before the threads turn to their bookkeeping, instead of each start
        waiting for the outcome statements of the runs before it. The worker (and so its
        job) stays busy until that outcome is recorded.
        """
        job, plan = self.job, self.plan
        lateness = self._lateness()
        if plan.claimed_run is not None:
            run = plan.claimed_run
            self._remember(JobRun.Status.RUNNING)
        elif plan.retry_run is not None:
            try:
                run = self._claim_retry()
            except RetryTaken:
                return False
        else:
            try:
                with transaction.atomic():
                    run = self._claim()
                    # The request and the slot are served by this claim: a crash from here
                    # on leaves an abandoned run (and the job's retry policy), never a
                    # request that is planned again and again.
                    self._claimed()
            except SlotTaken:
                self._slot_taken()
                return False
            self._remember(JobRun.Status.RUNNING)
        self.current_run = run
        started = time.monotonic()
        error: BaseException | None = None
        result = None
        try:
            with self._log_context(run):
                result = self._call()
        except Exception as exc:
            error = exc
        duration = time.monotonic() - started
        discard_broken_connection()
        if self.timed_out or self.past_deadline():
            status = JobRun.Status.TIMED_OUT
        else:
            status = JobRun.Status.SUCCEEDED if error is None else JobRun.Status.FAILED
        self.function_returned = True
        text = "".join(traceback.format_exception(error)) if error else ""
        if status == JobRun.Status.TIMED_OUT and not text:
            text = f"ran past its max_duration of {job.max_duration}"
        outcome = self._outcome(
            status,
            duration=duration,
            lateness=lateness,
            error=text,
            next_due=self._next_due(result) if not job.schedule.periodic else None,
            retry_at=self._retry_at(status, run.attempt),
        )
        self.host.journal.finished(job.name, self.slot, status)
        self._outcomes(lambda: self._step(lambda: self._finish(run, outcome, error)))
        return True

    def _finish(self, run: JobRun, outcome: ledger.RunOutcome, error) -> bool:
        """Record a claim-first run's outcome (its queued task); return False: nothing follows."""
        job = self.job

        def record() -> tuple[bool, bool] | None:
            paused = self.host.finish_run(run, job, outcome)
            return None if paused is None else (True, paused)

        # One statement on PostgreSQL (both rows or neither), so no transaction around it.
        recorded = self._durably("its outcome", record, atomic=False)
        if recorded is None:
            self.host.cut_off(f"{job.name} slot {self.slot.isoformat()} taken over")
            logger.warning(
                "[%s] job %s slot %s finished but its run was taken over; outcome not recorded",
                self.log_prefix,
                job.name,
                self.slot.isoformat(),
            )
            return False
        self._retry_noted(outcome.retry_at, run.attempt)
        self.host.report_outcome(
            job, self.slot, outcome.status, outcome.duration, error=error, paused=recorded[1]
        )
        return False

    def _next_due(self, result) -> datetime | None:
        """Return the job's next slot: from the plan (periodic) or the job's answer (when due)."""
        if self.job.schedule.periodic:
            return self.plan.next_due
        return when_due_next(result, self.job.schedule.next_after(self.host.clock.now()))
